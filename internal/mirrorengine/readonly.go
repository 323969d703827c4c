package mirrorengine

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
)

// readOnlyACL denies WRITE on a mirrored topic to every principal; super users (the
// worker's principal must be one) are not subject to ACLs.
func readOnlyACL(topic string) *kadm.ACLBuilder {
	return kadm.NewACLs().Deny("User:*").DenyHosts("*").Topics(topic).
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite)
}

// enforceReadOnly makes a mirrored topic read-only when the destination has an authorizer;
// without one (SECURITY_DISABLED) the offset check still detects foreign writes.
func (e *Engine) enforceReadOnly(ctx context.Context, topic string) (bool, error) {
	res, err := e.dst.Admin.CreateACLs(ctx, readOnlyACL(topic))
	if err == nil {
		for _, r := range res {
			if err = r.Err; err != nil {
				break
			}
		}
	}
	if errors.Is(err, kerr.SecurityDisabled) {
		return false, nil
	}
	if err != nil {
		return false, mirrorerr.WrapAuth("destination", "make topic "+topic+" read-only (CREATE ACL)", err)
	}
	return true, nil
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
