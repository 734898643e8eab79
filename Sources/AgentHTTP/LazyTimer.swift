import NIOCore

/// A deadline that moves on every request but rarely fires (the request guard's head and
/// body timeouts). Moving it costs a clock read: the one scheduled check stays in the event
/// loop's timer heap and, when it runs early, reschedules itself for the current deadline,
/// instead of a cancel and a new heap entry per request (measured in `agent-bench http`).
///
/// Event-loop confined: every call comes from `loop`'s thread. At most one scheduled check.
final class LazyTimer {
    private let loop: any EventLoop
    private let action: () -> Void
    private var deadline: NIODeadline?
    private var pending: (task: Scheduled<Void>, at: NIODeadline)?

    init(loop: any EventLoop, action: @escaping () -> Void) {
        self.loop = loop
        self.action = action
    }

    /// True while a deadline is set.
    var isArmed: Bool { deadline != nil }

    /// Sets the deadline to now + `amount` (replacing any earlier one).
    func arm(in amount: TimeAmount) {
        let deadline = NIODeadline.now() + amount
        self.deadline = deadline
        if let pending, pending.at <= deadline { return }
        pending?.task.cancel()
        schedule(at: deadline)
    }

    /// Clears the deadline; a scheduled check still runs and finds nothing to do.
    func disarm() { deadline = nil }

    /// Clears the deadline and the scheduled check (the handler is going away).
    func cancel() {
        deadline = nil
        pending?.task.cancel()
        pending = nil
    }

    private func schedule(at time: NIODeadline) {
        let task = loop.assumeIsolated().scheduleTask(deadline: time) { [self] in fired() }
        pending = (task, time)
    }

    private func fired() {
        pending = nil
        guard let deadline else { return }
        if deadline > .now() {
            schedule(at: deadline)
            return
        }
        self.deadline = nil
        action()
    }
}
