package mirrorengine

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// A mirror needs only read access to its source: a principal that may read the mirrored
// topic but not the source's __mirror_state starts mirroring (no reverse mirror state), it
// is not FAILED at every start.
func TestEngineSourceNeedsOnlyReadAccess(t *testing.T) {
	src := kafkatest.New(t, kafkatest.ClusterID("source-cluster"), kafkatest.WithACLs("admin", "admin-secret"), kafkatest.User("reader", "reader-secret"))
	dst := kafkatest.New(t, kafkatest.ClusterID("destination-cluster"))
	src.CreateTopic(t, "orders", 2, nil)
	// The source's own __mirror_state exists (it mirrors something elsewhere), unreadable
	// for the reader.
	src.CreateTopic(t, mirrorstate.DefaultStoreTopic, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records("orders", 0, 30, "a")...)
	acls := kadm.NewACLs().Allow("User:reader").AllowHosts().
		Topics("orders").Operations(kadm.OpRead, kadm.OpDescribe, kadm.OpDescribeConfigs).
		ResourcePatternType(kadm.ACLPatternLiteral)
	src.CreateACLs(t, acls)

	e := openEngine(t, dst)
	conn := sourceOf(src)
	conn.SASL = &mirrorstate.SASLSettings{Mechanism: "SCRAM-SHA-256", Username: "reader", Password: "reader-secret"}
	if _, err := e.CreateClusterMirror(context.Background(), mirrorstate.MirrorRecord{Name: "m", Source: conn}); err != nil {
		t.Fatal(err)
	}
	start(t, e, "m", "orders", "fail")
	waitState(t, e, "m", "orders", 2, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "orders", kafkatest.IdenticalWithin)
}
