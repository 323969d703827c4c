package mirrorengine

import (
	"context"
	"testing"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// One CREATE ACL round makes every topic that asked read-only; a destination without an
// authorizer has nothing to enforce, which is no error.
func TestReadOnlyRoundCoversEveryTopic(t *testing.T) {
	topics := []string{"payments", "refunds", "chargebacks"}
	acls := kafkatest.WithACLs("admin", "admin-secret")
	for _, tc := range []struct {
		name       string
		require    func(kafkatest.TB)
		opts       []kafkatest.Option
		authorizer bool
	}{
		{"kfake", kafkatest.RequireFake, []kafkatest.Option{acls}, true},
		{"kfake without an authorizer", kafkatest.RequireFake, nil, false},
		// Without an authorizer on Apache Kafka: every mirror on the kafka tier.
		{"kafka", kafkatest.RequireKafka, []kafkatest.Option{kafkatest.Kafka(kafkatest.KafkaNewest), acls}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.require(t)
			dst := kafkatest.New(t, tc.opts...)
			kafkatest.Tally(t, dst.Broker()+" (read-only ACLs)")
			e := openEngine(t, dst)
			for topic, err := range e.createReadOnlyACLs(topics) {
				if err != nil {
					t.Errorf("making %s read-only: %v", topic, err)
				}
			}
			if !tc.authorizer {
				return
			}
			res, err := dst.Admin(t).DescribeACLs(context.Background(), readOnlyACL(topics...))
			if err != nil {
				t.Fatal(err)
			}
			described := map[string]bool{}
			for _, r := range res {
				for _, d := range r.Described {
					described[d.Name] = true
				}
			}
			for _, topic := range topics {
				if !described[topic] {
					t.Errorf("no read-only ACL on %s; described: %v", topic, described)
				}
			}
		})
	}
}
