package mirrorengine

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
)

// ForeignTransactionError is a destination partition whose tail is a transaction left open
// by a producer that is not a mirror's: at failover an exactly-once application's
// transaction is usually still open on the old primary, which becomes the destination at
// failback. Its coordinator aborts it after the transaction timeout, or the application
// commits it; until then the partition's end is not final, and comparing or continuing would
// be undone by the marker that lands later. PREPARING waits (a retryable failure).
type ForeignTransactionError struct {
	Topic      string
	Partition  int32
	ProducerID int64
	TxnID      string // "" when the coordinator does not list it
	Start, End int64
}

func (e *ForeignTransactionError) Error() string {
	who := fmt.Sprintf("producer %d", e.ProducerID)
	if e.TxnID != "" {
		who += fmt.Sprintf(" (transactional id %q)", e.TxnID)
	}
	return fmt.Sprintf("destination %s[%d] holds a transaction that %s left open from offset %d (end %d), as an application's transaction on the old primary at failover: waiting until its coordinator aborts it (transaction timeout) or the application commits it",
		e.Topic, e.Partition, who, e.Start, e.End)
}

// foreignOpenTransaction returns the earliest transaction open on the destination partition
// that no mirror of ours wrote, or nil.
func (e *Engine) foreignOpenTransaction(ctx context.Context, topic string, partition int32, end int64) (*ForeignTransactionError, error) {
	described, err := e.dst.Admin.DescribeProducers(ctx, kadm.TopicsSet{topic: {partition: {}}})
	if err != nil {
		return nil, mirrorerr.WrapAuth("destination", "describe producers of "+topic, err)
	}
	open := map[int64]int64{} // producer id → first offset of its open transaction
	var ids []int64
	described.EachPartition(func(p kadm.DescribedProducersPartition) {
		for _, pr := range p.ActiveProducers {
			if pr.CurrentTxnStartOffset >= 0 {
				open[pr.ProducerID] = pr.CurrentTxnStartOffset
				ids = append(ids, pr.ProducerID)
			}
		}
	})
	if len(open) == 0 {
		return nil, nil
	}
	listed, err := e.dst.Admin.ListTransactions(ctx, ids, nil)
	if err != nil {
		return nil, mirrorerr.WrapAuth("destination", "list transactions", err)
	}
	names := map[int64]string{}
	for _, t := range listed {
		names[t.ProducerID] = t.TxnID
	}
	var first *ForeignTransactionError
	for pid, start := range open {
		if strings.HasPrefix(names[pid], datapath.TxnIDPrefix) {
			continue // ours: the data path adopts it
		}
		if first == nil || start < first.Start {
			first = &ForeignTransactionError{Topic: topic, Partition: partition, ProducerID: pid, TxnID: names[pid], Start: start, End: end}
		}
	}
	return first, nil
}
