package main

import "testing"

func TestFigureShowsOneRoundAsItIsAndSeveralAsMedianAndRange(t *testing.T) {
	mirror := ratios("mirror.zstd", "raw.zstd", "mirror.none", "raw.none")
	cpu := formatted("%.0f; %.1f", "cpu.zstd", "cpu.none")
	for _, tc := range []struct {
		name   string
		fig    figure
		rounds []map[string]float64
		want   string
		ok     bool
	}{
		{"nothing measured", mirror, []map[string]float64{{}}, "", false},
		{"a row's figures missing in part", mirror, []map[string]float64{{"mirror.zstd": 1, "raw.zstd": 2}}, "", false},
		{"one round", mirror, []map[string]float64{{"mirror.zstd": 1, "raw.zstd": 2, "mirror.none": 3, "raw.none": 4}}, "0.50 / 0.75", true},
		{"three rounds: each ratio within its round, then the median",
			mirror, []map[string]float64{
				{"mirror.zstd": 9, "raw.zstd": 10, "mirror.none": 1, "raw.none": 2},
				{"mirror.zstd": 1, "raw.zstd": 4, "mirror.none": 3, "raw.none": 4},
				{"mirror.zstd": 8, "raw.zstd": 10, "mirror.none": 1, "raw.none": 4},
			}, "0.80 (0.25–0.90) / 0.50 (0.25–0.75)", true},
		{"two rounds: the mean of the middle two", cpu, []map[string]float64{
			{"cpu.zstd": 10, "cpu.none": 1},
			{"cpu.zstd": 20, "cpu.none": 2},
		}, "15 (10–20); 1.5 (1.0–2.0)", true},
		{"rounds without the row's figures (measured once, in the first round) are left out", cpu, []map[string]float64{
			{"cpu.zstd": 10, "cpu.none": 1, "head.seconds": 1},
			{"head.seconds": 2},
		}, "10; 1.0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.fig.show(tc.rounds)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("show = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
