package mirrorengine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
)

// sourceRequestTimeout bounds a one-off exchange with a source cluster: the probe of a
// create or an update, a listing of its topics.
const sourceRequestTimeout = 15 * time.Second

// withSourceClient runs fn with a client of conn made for the occasion, within
// sourceRequestTimeout. A SASL authentication the source refuses ends it at once with
// SASL_AUTHENTICATION_FAILED naming the mechanism and the user: brokers that answer wrong
// credentials by closing the connection (kfake, Kafka before 1.0) look to the client like
// an outage, which it would retry until the timeout. Any other failure is
// SOURCE_CLUSTER_UNREACHABLE.
func (e *Engine) withSourceClient(ctx context.Context, conn mirrorstate.SourceConnection, fn func(context.Context, *kgo.Client) error) *CommandError {
	opts, err := kafkaconn.Opts(conn)
	if err != nil {
		return cmdErr(kip.CodeInvalidClusterMirrorConfig, "source: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, sourceRequestTimeout)
	defer cancel()
	watch := &saslWatch{cancel: cancel}
	cl, err := kgo.NewClient(append(append(opts, e.cfg.SourceOpts...), kgo.WithHooks(watch))...)
	if err != nil {
		return cmdErr(kip.CodeInvalidClusterMirrorConfig, "source: %w", err)
	}
	defer cl.Close()
	err = fn(ctx, cl)
	servers := strings.Join(conn.BootstrapServers, ",")
	var unsupported *kafkareq.UnsupportedBrokerError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unsupported):
		return cmdErr(kip.CodeUnsupportedVersion, "source cluster at %s: %w", servers, err)
	case conn.SASL != nil && (watch.refused.Load() || errors.Is(err, kerr.SaslAuthenticationFailed)):
		why := "the broker closed the connection instead of accepting the credentials"
		if errors.Is(err, kerr.SaslAuthenticationFailed) {
			why = err.Error()
		}
		return cmdErr(kip.CodeSaslAuthenticationFailed, "authentication failed: the source cluster at %s refused SASL mechanism %s for user %q (%s); check the user name and the password",
			servers, conn.SASL.Mechanism, conn.SASL.Username, why)
	}
	return cmdErr(kip.CodeSourceClusterUnreachable, "cannot reach the source cluster at %s: %w", servers, err)
}

// saslWatch is a client hook that notices a failed SASL authentication read (the broker
// closed the connection) and cancels the exchange rather than let the client retry it.
type saslWatch struct {
	cancel  context.CancelFunc
	refused atomic.Bool
}

var _ kgo.HookBrokerRead = (*saslWatch)(nil)

// OnBrokerRead implements kgo.HookBrokerRead.
func (w *saslWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.SASLAuthenticate) && err != nil {
		w.refused.Store(true)
		w.cancel()
	}
}

// ListSourceTopics lists the topics of the cluster conn reaches whose names match the
// regular expression pattern (every topic when empty), internal topics excluded, sorted.
// It serves a mirror's listing and the listing of a source no mirror has yet (a plan).
func (e *Engine) ListSourceTopics(ctx context.Context, conn mirrorstate.SourceConnection, pattern string) ([]string, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, cmdErr(kip.CodeInvalidRequest, "pattern %q is not a regular expression: %w", pattern, err)
	}
	var out []string
	cerr := e.withSourceClient(ctx, conn, func(ctx context.Context, cl *kgo.Client) error {
		names, err := listTopics(ctx, cl)
		for _, n := range names {
			if !strings.HasPrefix(n, "__") && re.MatchString(n) {
				out = append(out, n)
			}
		}
		return err
	})
	if cerr != nil {
		return nil, cerr
	}
	return out, nil
}

// listTopics returns the names of the cluster's non-internal topics, sorted, as one broker
// sees them: the lowest-numbered one. Brokers learn of a deleted topic one after another
// and a client's metadata cache mixes their answers, so a listing from any broker can show
// a deleted topic again after it was gone; one broker's view only moves forward.
func listTopics(ctx context.Context, cl *kgo.Client) ([]string, error) {
	brokers := kmsg.NewPtrMetadataRequest()
	brokers.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	meta, err := brokers.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(meta.Brokers) == 0 {
		return nil, errors.New("the cluster reports no brokers")
	}
	first := slices.MinFunc(meta.Brokers, func(a, b kmsg.MetadataResponseBroker) int { return int(a.NodeID - b.NodeID) })
	all, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.Broker(int(first.NodeID))) // nil Topics: every topic
	if err != nil {
		return nil, fmt.Errorf("listing the topics on broker %d: %w", first.NodeID, err)
	}
	var out []string
	for _, t := range all.Topics {
		switch {
		case t.Topic == nil || t.IsInternal:
		case t.ErrorCode == kerr.UnknownTopicOrPartition.Code, t.ErrorCode == kerr.TopicAuthorizationFailed.Code:
		default:
			out = append(out, *t.Topic)
		}
	}
	slices.Sort(out)
	return out, nil
}
