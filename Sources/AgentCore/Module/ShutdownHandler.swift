import ServiceLifecycle
import Synchronization

/// Runs a service's `operation` and calls `stop` once, when graceful shutdown begins or the
/// task is cancelled, whichever comes first. ServiceLifecycle's `withGracefulShutdownHandler`
/// reacts only to graceful shutdown, but a cancelled `ServiceGroup` (a parent task
/// cancelled, a test's time limit) cancels its services without one: a service that waits
/// for its own shutdown signal (a channel's close future, a work signal) would never end.
public func withShutdownHandler<T>(
    _ operation: () async throws -> T, onShutdown stop: @escaping @Sendable () -> Void
) async rethrows -> T {
    let stopped = Atomic(false)
    let stopOnce: @Sendable () -> Void = {
        if !stopped.exchange(true, ordering: .relaxed) { stop() }
    }
    return try await withTaskCancellationHandler {
        try await withGracefulShutdownHandler(operation: operation, onGracefulShutdown: stopOnce)
    } onCancel: {
        stopOnce()
    }
}
