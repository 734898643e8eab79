import ServiceLifecycle

/// Runs an action when graceful shutdown reaches it (place it last to run first).
struct ShutdownHook: Service {
    let action: @Sendable () async -> Void

    init(_ action: @escaping @Sendable () async -> Void) {
        self.action = action
    }

    func run() async throws {
        try? await gracefulShutdown()
        await action()
    }
}
