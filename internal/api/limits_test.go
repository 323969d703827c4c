package api

import (
	"strings"
	"testing"
	"time"
)

func TestSyncIntervalRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string // a substring of the error; "" when valid
	}{
		{"1s", time.Second, ""},
		{"30s", 30 * time.Second, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"24h", 24 * time.Hour, ""},
		{"1ns", 0, `"1ns" is out of range: it must be from 1s to 24h`},
		{"999ms", 0, `"999ms" is out of range`},
		{"0s", 0, "out of range"},
		{"-1m", 0, "out of range"},
		{"24h0m1s", 0, `"24h0m1s" is out of range: it must be from 1s to 24h`},
		{"often", 0, `"often" is not a duration; give a number with a unit, such as 30s, 5m or 1h30m, from 1s to 24h`},
		{"30", 0, `"30" is not a duration`},
		{"", 0, "not a duration"},
	} {
		d, err := SyncIntervalRange.Parse(tc.in)
		switch {
		case tc.err == "" && (err != nil || d != tc.want):
			t.Errorf("%q: %v, %v; want %v", tc.in, d, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "24h", time.Minute: "1m", 90 * time.Minute: "1h30m", time.Second: "1s",
		100 * time.Millisecond: "100ms", 61 * time.Second: "1m1s", time.Hour + time.Second: "1h0m1s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestCheckBrokerAddress(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"kafka-1.example.com:9092", ""},
		{"127.0.0.1:1", ""},
		{"127.0.0.1:65535", ""},
		{"[::1]:9092", ""},
		{"127.0.0.1:99999", `"127.0.0.1:99999" has port "99999"; a port is a number from 1 to 65535`},
		{"127.0.0.1:0", `has port "0"`},
		{"127.0.0.1:-1", `has port "-1"`},
		{"kafka:http", `has port "http"`},
		{"kafka:", `has port ""`},
		{":9092", `":9092" has no host`},
		{"kafka-1", `"kafka-1" is not host:port`},
		{"::1:9092", "is not host:port"},
		{"", `"" is not host:port`},
	} {
		err := CheckBrokerAddress(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
		}
	}
}
