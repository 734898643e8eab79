import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A short command run to completion on the ``ChildReactor`` (no thread of its own): stdin
/// from /dev/null, stdout and stderr read from pipes (bounded), a deadline, then the exit
/// status. For the agent's helper commands (`screen -X`, the header command).
///
/// Memory: at most `maxOutput` + `maxErrors` bytes kept, and one 16 KiB read buffer per read.
public enum ChildCapture {
    /// How a captured run ended.
    public struct Result: Sendable {
        /// The wait status; nil when it could not start (``failure``) .
        public var status: Int32?
        public var output: [UInt8] = []
        public var errors: [UInt8] = []
        /// The deadline passed: the child (``Options/killScope``) got SIGKILL.
        public var timedOut = false
        /// Stdout passed `maxOutput` with ``Options/killOnOverflow``: the child got SIGKILL.
        public var overflowed = false
        /// Why it could not start.
        public var failure: ChildSpawnError?
    }

    public struct Options: Sendable {
        /// Stdout bytes kept.
        public var maxOutput: Int
        /// Stderr bytes kept (0: read and dropped).
        public var maxErrors: Int
        /// Stderr goes to the stdout pipe (and counts as output).
        public var mergeErrors = false
        /// More stdout than `maxOutput` ends the run (else the excess is dropped).
        public var killOnOverflow = false
        public var timeout: Duration
        /// Who gets SIGKILL at the deadline or on overflow.
        public var killScope: Child.Scope = .group

        public init(maxOutput: Int, maxErrors: Int = 0, mergeErrors: Bool = false, timeout: Duration) {
            self.maxOutput = maxOutput
            self.maxErrors = maxErrors
            self.mergeErrors = mergeErrors
            self.timeout = timeout
        }
    }

    /// Runs `spec` (its stdio replaced) and calls `completion` once, on the reactor's thread
    /// or, when it cannot start, on this one. The result comes once both pipes are closed
    /// (or given up at the deadline) and the exit is seen.
    public static func run(
        _ spec: ChildSpec, options: Options, reactor: ChildReactor = .shared,
        completion: @escaping @Sendable (Result) -> Void
    ) {
        guard let out = ChildPipe.output() else {
            return completion(Result(failure: ChildSpawnError(step: .start, errno: errno)))
        }
        let err = options.mergeErrors ? nil : ChildPipe.output()
        if !options.mergeErrors && err == nil {
            let code = errno
            close(out.read)
            close(out.write)
            return completion(Result(failure: ChildSpawnError(step: .start, errno: code)))
        }
        var spec = spec
        spec.input = -1
        spec.output = out.write
        spec.errors = err?.write ?? -1
        let child: Child
        do throws(ChildSpawnError) {
            child = try reactor.spawn(spec)
        } catch {
            close(out.write)
            if let err { close(err.write) }
            close(out.read)
            if let err { close(err.read) }
            return completion(Result(failure: error))
        }
        close(out.write)
        if let err { close(err.write) }
        let run = Run(child: child, options: options, reactor: reactor, pipes: err == nil ? 1 : 2, completion: completion)
        run.start(output: out.read, errors: err?.read)
    }

    /// ``run(_:options:reactor:completion:)`` awaited.
    public static func run(_ spec: ChildSpec, options: Options, reactor: ChildReactor = .shared) async -> Result {
        await withCheckedContinuation { continuation in
            run(spec, options: options, reactor: reactor) { continuation.resume(returning: $0) }
        }
    }

    /// ``run(_:options:reactor:completion:)`` blocking the calling thread (for code that runs
    /// before the agent serves anything and has no task to await in).
    public static func runBlocking(_ spec: ChildSpec, options: Options, reactor: ChildReactor = .shared) -> Result {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result?>(nil)
        run(spec, options: options, reactor: reactor) { value in
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    /// One run's state, touched by the reactor's handlers (and the spawn's caller at start).
    private final class Run: Sendable {
        private struct State {
            var result = Result()
            var openPipes: Int
            var tokens: [UInt64] = []
            var timer: UInt64?
            var ended = false
            var completion: (@Sendable (Result) -> Void)?
        }

        let child: Child
        let options: Options
        let reactor: ChildReactor
        private let state: Mutex<State>

        init(child: Child, options: Options, reactor: ChildReactor, pipes: Int, completion: @escaping @Sendable (Result) -> Void) {
            self.child = child
            self.options = options
            self.reactor = reactor
            state = Mutex(State(openPipes: pipes, completion: completion))
        }

        func start(output: Int32, errors: Int32?) {
            var tokens = [reactor.watchReadable(output, closed: { self.pipeClosed() }) { self.read($0, errors: false) }]
            if let errors {
                tokens.append(reactor.watchReadable(errors, closed: { self.pipeClosed() }) { self.read($0, errors: true) })
            }
            state.withLock { $0.tokens = tokens }
            let timer = reactor.schedule(at: .now + options.timeout) { self.stop(timedOut: true) }
            state.withLock { $0.timer = timer }
            child.onExit { status in
                self.state.withLock { $0.result.status = status }
                self.finishIfDone()
            }
        }

        private func read(_ fd: Int32, errors: Bool) -> ChildReactor.ReadOutcome {
            var chunk = [UInt8](repeating: 0, count: 16 << 10)
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 { return errno == EAGAIN || errno == EINTR ? .keep : .close }
            if n == 0 { return .close }
            let overflow = state.withLock { s -> Bool in
                if errors {
                    let room = max(0, options.maxErrors - s.result.errors.count)
                    s.result.errors += chunk[0..<min(n, room)]
                    return false
                }
                let room = max(0, options.maxOutput - s.result.output.count)
                s.result.output += chunk[0..<min(n, room)]
                return n > room && options.killOnOverflow
            }
            if overflow { stop(timedOut: false) }
            return .keep
        }

        /// The deadline or an overflow: SIGKILL, and the pipes are given up.
        private func stop(timedOut: Bool) {
            let tokens = state.withLock { s -> [UInt64]? in
                guard !s.ended, !s.result.timedOut, !s.result.overflowed else { return nil }
                if timedOut { s.result.timedOut = true } else { s.result.overflowed = true }
                return s.tokens
            }
            guard let tokens else { return }
            child.signal(SIGKILL, to: options.killScope)
            for token in tokens { reactor.closeReadable(token) }
        }

        private func pipeClosed() {
            state.withLock { $0.openPipes -= 1 }
            finishIfDone()
        }

        private func finishIfDone() {
            let finished = state.withLock { s -> (Result, @Sendable (Result) -> Void, UInt64?)? in
                guard !s.ended, s.openPipes == 0, s.result.status != nil, let completion = s.completion else { return nil }
                s.ended = true
                s.completion = nil
                return (s.result, completion, s.timer)
            }
            guard let (result, completion, timer) = finished else { return }
            if let timer { reactor.cancelTimer(timer) }
            completion(result)
        }
    }
}
