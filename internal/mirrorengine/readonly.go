package mirrorengine

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
)

// readOnlyACL denies WRITE on mirrored topics to every principal; super users (the
// worker's principal must be one) are not subject to ACLs.
func readOnlyACL(topics ...string) *kadm.ACLBuilder {
	return kadm.NewACLs().Deny("User:*").DenyHosts("*").Topics(topics...).
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite)
}

// enforceReadOnly makes a mirrored topic read-only when the destination has an authorizer;
// without one (SECURITY_DISABLED) the offset check still detects foreign writes. The
// partitions that start fetching together share one CREATE ACL round for all their topics
// (a broker answers one request per connection at a time: a thousand partitions asking one
// by one wait a second for it), each answered by a round that began after it asked.
func (e *Engine) enforceReadOnly(ctx context.Context, topic string) error {
	errs, err := e.readOnly.Ask(ctx, topic)
	if err != nil {
		return err
	}
	return errs[topic]
}

// createReadOnlyACLs creates the read-only ACLs of topics and returns each topic's error.
func (e *Engine) createReadOnlyACLs(topics []string) map[string]error {
	errs := make(map[string]error, len(topics))
	res, err := e.dst.Admin.CreateACLs(e.ctx, readOnlyACL(topics...))
	for _, topic := range topics {
		errs[topic] = err
	}
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				errs[r.Name] = r.Err
			}
		}
	}
	for topic, err := range errs {
		if err != nil && !errors.Is(err, kerr.SecurityDisabled) {
			errs[topic] = mirrorerr.WrapAuth("destination", "make topic "+topic+" read-only (CREATE ACL)", err)
		} else {
			errs[topic] = nil
		}
	}
	return errs
}

// liftReadOnly removes the read-only ACL; nothing to do without an authorizer.
func (e *Engine) liftReadOnly(ctx context.Context, topic string) error {
	res, err := e.dst.Admin.DeleteACLs(ctx, readOnlyACL(topic))
	if err == nil {
		for _, r := range res {
			if err = r.Err; err != nil {
				break
			}
		}
	}
	if err != nil && !errors.Is(err, kerr.SecurityDisabled) {
		return mirrorerr.WrapAuth("destination", "make topic "+topic+" writable (DELETE ACL)", err)
	}
	return nil
}
