import CAgentSpawn
#if canImport(Glibc)
import Glibc
#endif

/// Starts detached OS threads for the few loops that must block in the kernel (the process
/// reactor's epoll, inotify, the shutdown watchdog, libvncclient). Foundation's `Thread`
/// would do, but Foundation is not linked (the agent uses FoundationEssentials only).
public enum AgentThread {
    private final class Body: Sendable {
        let name: String
        let run: @Sendable () -> Void
        init(name: String, run: @escaping @Sendable () -> Void) {
            self.name = name
            self.run = run
        }
    }

    /// Runs `body` on a new detached thread named `name` (the kernel keeps 15 bytes of it).
    /// Crashes if the system cannot create a thread (as Foundation's `Thread` would).
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Body(name: name, run: body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { argument in
                let body = Unmanaged<Body>.fromOpaque(argument!).takeRetainedValue()
                _ = agent_set_thread_name(body.name)
                body.run()
                return nil
            }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        pthread_detach(thread)
    }
}
