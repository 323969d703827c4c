package mirrorengine

// Unreadable __mirror_state records (Store.BadRecords). Each is confined to what it
// describes, which waits for the operator; everything else keeps mirroring:
//
//   - partition/<m>/<t>/<p>: that partition is FAILED, not retryable, and nothing moves it but
//     a command: a start prepares it again (which continues a destination that is a prefix of
//     the source), a stop stops it. Removing the record lets it prepare by itself.
//   - mirror/<m>: the mirror is listed and described with the problem; its topics do not run
//     and commands on it are refused. Once the record is removed, creating the mirror again
//     resumes its topics.
//   - topicconfig/<t>: the topic does not run and commands on it are refused. Once the record
//     is removed, starting the topic again continues it.
//   - lastmirror/...: only reported; the partition's next stop rewrites it.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// StateRecordKinds are the kinds of __mirror_state records (StateRecord.Kind).
var StateRecordKinds = []string{mirrorstate.KindName(mirrorstate.KindMirror), mirrorstate.KindName(mirrorstate.KindTopicConfig), mirrorstate.KindName(mirrorstate.KindPartition), mirrorstate.KindName(mirrorstate.KindLastMirror)}

// BadStateRecords lists the __mirror_state records that cannot be read, sorted by key.
func (e *Engine) BadStateRecords() []mirrorstate.StateRecord { return e.store.BadRecords() }

// StateRecord returns the record stored under key, for an operator's eyes: the value of a
// mirror record has its secret fields (sealed as they are) replaced by "[redacted]".
func (e *Engine) StateRecord(key string) (mirrorstate.StateRecord, error) {
	if _, err := mirrorstate.ParseKey(key); err != nil {
		return mirrorstate.StateRecord{}, cmdErr(kip.CodeInvalidRequest, "%q is not a __mirror_state key: %w", key, err)
	}
	r, ok := e.store.Record(key)
	if !ok {
		return mirrorstate.StateRecord{}, cmdErr(kip.CodeUnknownMirrorStateRecord, "no __mirror_state record %q", key)
	}
	if r.Kind == mirrorstate.KindName(mirrorstate.KindMirror) {
		r.Value = redactMirrorValue(r.Value)
	}
	return r, nil
}

// redactMirrorValue replaces the secret fields of a mirror value that is a JSON object; a
// value that is not is returned as it is (it holds no field to redact).
func redactMirrorValue(value []byte) []byte {
	var v map[string]any
	if json.Unmarshal(value, &v) != nil {
		return value
	}
	source, _ := v["source"].(map[string]any)
	for _, secret := range [...]struct{ block, field string }{{"sasl", "password"}, {"tls", "client_key_pem"}} {
		if b, ok := source[secret.block].(map[string]any); ok && b[secret.field] != nil {
			b[secret.field] = mirrorstate.Redacted
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return value
	}
	return out
}

// RemoveStateRecord writes the tombstone of a record that cannot be read, and lets what it
// described continue: a partition prepares again at once. A readable record is removed only
// with force, and only a partition or lastmirror record: mirrors and topic configs have
// their commands (delete, stop).
func (e *Engine) RemoveStateRecord(ctx context.Context, key string, force bool) error {
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	k, err := mirrorstate.ParseKey(key)
	if err != nil {
		return cmdErr(kip.CodeInvalidRequest, "%q is not a __mirror_state key: %w", key, err)
	}
	r, ok := e.store.Record(key)
	switch {
	case !ok:
		return cmdErr(kip.CodeUnknownMirrorStateRecord, "no __mirror_state record %q", key)
	case r.Problem == "" && !force:
		return cmdErr(kip.CodeInvalidRequest, "__mirror_state record %q is readable; only unreadable records are removed (force removes a readable partition or lastmirror record)", key)
	case r.Problem == "" && (k.Kind == mirrorstate.KindMirror || k.Kind == mirrorstate.KindTopicConfig):
		return cmdErr(kip.CodeInvalidRequest, "__mirror_state record %q is readable: delete the mirror or stop the topic instead", key)
	}
	if cerr := e.record(ctx, fmt.Sprintf("removing __mirror_state record %q", key), func(ctx context.Context) error {
		return e.store.DeleteKey(ctx, key)
	}); cerr != nil {
		return cerr
	}
	e.log.Warn("__mirror_state record removed by the operator", "key", key, "problem", r.Problem, "forced", r.Problem == "")
	if k.Kind == mirrorstate.KindPartition {
		e.reloadRunner(partitionKey{k.Mirror, k.Topic, k.Partition})
	}
	return nil
}

// reloadRunner replaces a partition's runner with one that starts from what the store holds
// now, when the partition is mirrored.
func (e *Engine) reloadRunner(k partitionKey) {
	if old := take(&e.mu, e.runners, k); old != nil {
		old.close()
	}
	tc, ok := e.store.TopicConfig(k.topic)
	if mirror, _ := partitionstate.ParseMirrorName(tc.MirrorName); ok && mirror == k.mirror {
		if _, ok := e.store.Mirror(k.mirror); ok {
			e.runner(k)
		}
	}
}

// recordProblem is the problem of the record stored under k, "" when it is readable or absent.
func (e *Engine) recordProblem(k mirrorstate.RecordKey) string {
	r, _ := e.store.Record(k.String())
	return r.Problem
}

// mirrorProblem refuses commands on a mirror whose record cannot be read; nil otherwise.
func (e *Engine) mirrorProblem(name string) *CommandError {
	return e.refusal(mirrorstate.RecordKey{Kind: mirrorstate.KindMirror, Mirror: name}, "cluster mirror", name, "its topics do not run", "create the mirror again (its topics resume)")
}

// topicProblem refuses commands on a topic whose config record cannot be read; nil otherwise.
func (e *Engine) topicProblem(topic string) *CommandError {
	return e.refusal(mirrorstate.RecordKey{Kind: mirrorstate.KindTopicConfig, Topic: topic}, "topic", topic, "it does not run", "start the topic again")
}

// refusal is the refusal of commands on what the record under k describes, when it cannot
// be read: what the operator sees meanwhile and how to repair it.
func (e *Engine) refusal(k mirrorstate.RecordKey, what, name, meanwhile, then string) *CommandError {
	if p := e.recordProblem(k); p != "" {
		return cmdErr(kip.CodeMirrorStateRecordUnreadable, "%s %q cannot be used: %s; %s. Repair: kafkamirror-worker state remove %s, then %s",
			what, name, p, meanwhile, k, then)
	}
	return nil
}

// lookupMirror returns the named mirror, or why a command cannot use it.
func (e *Engine) lookupMirror(name string) (mirrorstate.MirrorRecord, *CommandError) {
	if cerr := e.mirrorProblem(name); cerr != nil {
		return mirrorstate.MirrorRecord{}, cerr
	}
	m, ok := e.store.Mirror(name)
	if !ok {
		return mirrorstate.MirrorRecord{}, cmdErr(kip.CodeUnknownClusterMirror, "cluster mirror %q does not exist", name)
	}
	return m, nil
}

// unreadablePartition is the status of a partition whose record cannot be read: FAILED for
// the operator, with the record's problem and the ways out.
func unreadablePartition(k partitionKey, problem string) partitionstate.Status {
	key := mirrorstate.RecordKey{Kind: mirrorstate.KindPartition, Mirror: k.mirror, Topic: k.topic, Partition: k.partition}
	return partitionstate.Status{State: partitionstate.StateFailed, RetryAttempt: -1, Error: fmt.Sprintf(
		"%s; the partition waits for the operator: start the topic again, or kafkamirror-worker state remove %s, and it continues from its destination when that is a prefix of the source",
		problem, key)}
}
