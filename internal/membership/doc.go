// Package membership makes the workers that share a destination cluster one group on that
// cluster's group coordinator, as Kafka Connect does, and splits the work among them so that
// every unit (a mirrored partition, a mirror's metadata sync, the commands) has at most one
// writer at any time. It knows nothing of the worker, the API or the engine.
//
// # Protocol
//
// Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) with the protocol
// type "kafkamirror" and the protocol name "kafkamirror-v1", issued as kmsg requests through a
// kgo.Client. kgo's own group machinery can carry another protocol type (kgo.GroupProtocol) but
// its assignments are topic partitions that it consumes itself, and it exposes neither its
// heartbeat answers nor their timing, which the leases below are made of.
//
// Member metadata (versioned) carries the worker's id, version and API address, a fingerprint
// of the settings the group must share (with the lease), the generation of the assignment held,
// the units held and the units released. The leader refuses a member whose fingerprint differs
// from that of the members already serving (or whose metadata it cannot read); the
// coordinator itself refuses a member of another protocol type or version. The refused
// member's Join returns an *IncompatibleError and it leaves the group.
//
// # Assignment in two rounds
//
// The leader's assignment (balance) is deterministic, balanced (counts differ by at most one)
// and sticky. A unit moves between two live members in two rounds, as in Connect's
// incremental cooperative protocol: in round one the leader gives it to nobody; its holder
// stops it, waits for its Run to return, and rejoins reporting it released; in round two the
// leader gives it to its new owner, which starts it at once. Units that are kept never stop.
// A unit that nobody reports released (its holder died, or left, or lost its lease) is given
// in round one, Delayed: the new owner waits out the old owner's lease first, unless the
// leader knows it quiet (below).
//
// A member's assignment carries its own units, the group's members with their counts and
// mirror-level units (to find the owner of Commands), a hash of the units the leader
// assigned, and how many units it withheld: the group's assignments, which the coordinator
// stores in one record, grow with the units, not with units × members. Who runs a
// partition is read back from the coordinator (DescribeGroups: Owners).
//
// # When to rebalance
//
// Only a change the leader does not know yet is worth a rebalance. Rebalance compares the
// member's units with the hash of those the leader assigned: the leader asks at once; another
// member only when the difference lasts UnitsGrace, since the leader follows the same store
// and normally asks first. A member whose heartbeat learns of a rebalance joins it once:
// requests to rejoin made before or during a join are answered by that join (left pending,
// each would start the next rebalance, and the group would never settle).
//
// # Leases: never two writers
//
// Each owned unit has a context (Config.Run's ctx) that ends when the member can no longer
// prove ownership: lease expired, unit revoked, generation fenced, Leave or refusal. The lease
// runs for Lease from the moment a request was sent whose answer proved this member's place in
// its current generation: a Heartbeat answered with no error or REBALANCE_IN_PROGRESS, a
// SyncGroup answered with an assignment. The timing argument, for a unit u that A owns in
// generation g and B is given in a later generation g':
//
//   - The coordinator checks the generation before anything else in Heartbeat, and answers
//     REBALANCE_IN_PROGRESS only while the group is still preparing generation g (Apache Kafka's
//     GroupMetadataManager.classicGroupHeartbeatToClassicGroup). So every answer that extended
//     A's lease for g was produced before g' existed, hence before B received g'. A's last
//     lease therefore ends at most Lease after B received u. B waits Lease before starting a
//     Delayed u: A's lease has ended by then (same clock rate assumed: monotonic clocks drift by
//     parts per million, and Lease is seconds).
//   - If A died or paused, the coordinator removes A only after SessionTimeout without a
//     heartbeat, which is longer than Lease: A's units were cancelled (by A's timer, or by its
//     context's Err reading the clock when A resumes) before the coordinator can even start the
//     rebalance that hands them over.
//   - A unit reported released had its Run return before A's JoinGroup was sent: its writer
//     has stopped, and B may start at once.
//
// # Quiet units: no delay where no lease can remain
//
// A new topic's partitions have never had an owner, and a unit nobody has owned for longer
// than a lease has none whose lease still runs: waiting once more would only delay the
// start. The leader L knows this from its run: the generations g_a, g_a+1, …, g it assigned
// one after the other as the same member (any other leader in between, or a new member id,
// starts a new run). It records when each join answer of the run arrived (start(j), after
// the coordinator created generation j) and, for each unit, the last generation k of the
// run in which a member claimed it (its JoinGroup metadata listed it held) or L gave it
// (k = g_a−1 when that never happened in the run). A unit u that nobody claims in g is quiet
// when start(k+1) + Lease ≤ now, and is then given without delay. Why no A can still write u:
//
//   - A's ownership of u lives on a lease proved by an answer, sent at most Lease before,
//     that placed A in its current generation gA (a Heartbeat answered with no error or
//     REBALANCE_IN_PROGRESS, a SyncGroup answer): produced while gA was current or while
//     gA+1 was being prepared, so before gA+1 existed (the argument above).
//   - A held u in gA, so its JoinGroup for gA listed u (it takes units only from SyncGroup
//     answers, each applied before its next JoinGroup is sent), or gA's assignment gave u
//     to A. If gA is in the run, that makes gA ≤ k; if not, gA < g_a ≤ k+1. Either way gA+1
//     ≤ k+1, so the answer behind A's lease came before start(k+1), and A's lease ended
//     before start(k+1) + Lease ≤ now, before B even receives u.
//   - A member whose metadata L cannot read may hold anything: that generation and the
//     next start a new run. A refused member's claims count like the others'.
//
// A write A sent before its lease ended and that is still in flight is no more covered than
// with the delay (which also counts from the lease); the offset check is the guard there.
// A unit that a member stopped but whose Run has not returned is neither claimed nor
// released; it was stopped before that member's next JoinGroup, hence before start(k+1),
// so it is quiet no sooner than a lease after the stop, as the delay would have made it.
//
// Static membership (group.instance.id) is not used: the coordinator hands a restarted static
// member its predecessor's assignment without a rebalance, hence without the handover delay,
// while the predecessor may still be a paused process holding a lease.
//
// The last guard stays the data path's own: every produce's assigned offset is verified.
//
// # How the worker uses it
//
// The worker joins with its id, version and API address, Units returning one Partition per
// mirrored partition of __mirror_state, one MirrorSync per mirror and Commands, and Run
// starting the matching runner with the unit's context: a partition runner stops producing
// when the context ends (checking ctx.Err before each produce) and Run returns once no write is
// outstanding. It calls Rebalance whenever its view of __mirror_state may add or remove
// units, and observes Started (a unit's time without an owner) in its metrics. A
// command that changes __mirror_state is applied by the owner of Commands: a worker that does
// not own it forwards the request to the owner's APIAddress (Members), and the owner serialises
// commands as today; an owner change mid-command is covered by the state epoch of partition
// records (conditional writes). Describe works on any worker from __mirror_state and Owners;
// Members shows who owns how much. A single worker is a group of one.
package membership
