import AgentSystem
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A ``ChildReactor/Client`` (the process API's way onto the reactor): its descriptors,
/// parking, ticks and end, on a reactor of the test's own. Waits for events (generous
/// bounds), never for time to pass.
struct ChildReactorClientTests {
    static let bound: Duration = .seconds(30)

    /// Reads its pipe on `ready`, parks it after the first read and unparks it on the tick
    /// at the deadline it asked for; records the threads it was called on.
    final class PipeClient: ChildReactor.Client {
        struct State {
            var text = ""
            var words: [UInt64] = []
            var threads: Set<UInt> = []
            var parkedUntil: ContinuousClock.Instant?
            var ticks = 0
            var afterEnd = 0
            var ended = false
        }

        static let word: UInt64 = ChildReactor.maxClientWord
        let registration: ChildReactor.Registration
        let fd: Int32
        let state = Mutex(State())
        let sawFirst = Latch()
        let sawAll = Latch()
        let ticked = Latch()
        let detachedOnce = Latch()
        let needle: String

        init(_ reactor: ChildReactor, fd: Int32, needle: String) {
            registration = reactor.register()
            self.fd = fd
            self.needle = needle
            registration.serve(self)
            registration.add(fd, word: Self.word)
        }

        func ready(_ word: UInt64, scratch: UnsafeMutableRawBufferPointer) {
            #expect(scratch.count == ChildReactor.scratchSize)
            let n = read(fd, scratch.baseAddress, scratch.count)
            let text = n > 0 ? String(decoding: UnsafeRawBufferPointer(rebasing: scratch[0..<n]), as: UTF8.self) : ""
            let park = state.withLock { s -> Bool in
                if s.ended { s.afterEnd += 1 }
                s.words.append(word)
                s.threads.insert(UInt(pthread_self()))
                s.text += text
                guard s.parkedUntil == nil, s.words.count == 1 else { return false }
                s.parkedUntil = .now + .milliseconds(5)
                return true
            }
            if park { #expect(registration.setReadable(fd, word: word, false)) }
            sawFirst.open()
            if state.withLock({ $0.text.contains(needle) }) { sawAll.open() }
        }

        func tick(now: ContinuousClock.Instant, scratch: UnsafeMutableRawBufferPointer) -> ContinuousClock.Instant? {
            let (unpark, next) = state.withLock { s -> (Bool, ContinuousClock.Instant?) in
                if s.ended { s.afterEnd += 1 }
                s.ticks += 1
                s.threads.insert(UInt(pthread_self()))
                guard let until = s.parkedUntil else { return (false, nil) }
                if until <= now {
                    s.parkedUntil = nil
                    return (true, nil)
                }
                return (false, until)
            }
            if unpark { #expect(registration.setReadable(fd, word: Self.word, true)) }
            ticked.open()
            return next
        }

        func detached() {
            let first = state.withLock { s -> Bool in
                defer { s.ended = true }
                s.threads.insert(UInt(pthread_self()))
                return !s.ended
            }
            #expect(first, "detached once")
            registration.remove(fd)
            close(fd)
            detachedOnce.open()
        }
    }

    static func wait(_ latch: Latch) async -> Bool {
        await sleep(for: bound, orUntil: { await latch.wait() }) == .signalled
    }

    /// The reactor's thread id, asked on the reactor.
    static func reactorThread(_ reactor: ChildReactor) async -> UInt {
        await withCheckedContinuation { continuation in reactor.run { continuation.resume(returning: UInt(pthread_self())) } }
    }

    @Test func aClientGetsItsWordsOnTheReactorAndAParkedPipeWakesAtItsTick() async throws {
        let reactor = ChildReactor(name: "test-client")
        let pipe = try #require(ChildPipe.output())
        defer { close(pipe.write) }
        let client = PipeClient(reactor, fd: pipe.read, needle: "second")
        #expect(write(pipe.write, "first\n", 6) == 6)
        #expect(await Self.wait(client.sawFirst))
        // Parked now: what comes next is read once the tick at the client's deadline
        // turns readability on again.
        #expect(write(pipe.write, "second\n", 7) == 7)
        #expect(await Self.wait(client.sawAll))
        let seen = client.state.withLock { $0 }
        #expect(seen.text == "first\nsecond\n")
        #expect(seen.words.allSatisfy { $0 == PipeClient.word }, "the whole 40-bit word comes back")
        #expect(seen.ticks >= 2)
        let thread = await Self.reactorThread(reactor)
        #expect(seen.threads == [thread], "every call on the reactor's one thread")

        client.registration.end()
        #expect(await Self.wait(client.detachedOnce))
        // A round through the reactor after the end: the client is called no more.
        _ = await Self.reactorThread(reactor)
        client.registration.wake()
        _ = await Self.reactorThread(reactor)
        #expect(client.state.withLock { $0.afterEnd } == 0)
    }

    /// Records the words it is handed; nothing else.
    final class WordClient: ChildReactor.Client {
        let got = Latch()
        func ready(_ word: UInt64, scratch: UnsafeMutableRawBufferPointer) { got.open() }
        func tick(now: ContinuousClock.Instant, scratch: UnsafeMutableRawBufferPointer) -> ContinuousClock.Instant? { nil }
        func detached() {}
    }

    /// A client served while the reactor is inside a wake-up, whose one-shot writability
    /// event comes in that wake-up's wait (before the client is applied): it is still
    /// delivered. The reactor is held in a job of the test's so that the order is certain;
    /// before, the event was dropped and, one-shot, never reported again (a writer waited
    /// out its deadline).
    @Test func aOneShotEventForAClientServedMidWakeUpIsDelivered() async throws {
        let reactor = ChildReactor(name: "test-one-shot")
        let pipe = try #require(ChildPipe.output())
        defer {
            close(pipe.read)
            close(pipe.write)
        }
        let held = Latch()
        let release = ReactorHold()
        reactor.run {
            held.open()
            release.wait()
        }
        #expect(await Self.wait(held))
        // While the reactor runs the job: served (queued, the eventfd written) and the pipe,
        // empty and so writable, added one-shot. Both are reported in the same wait.
        let client = WordClient()
        let registration = reactor.register()
        registration.serve(client)
        #expect(registration.addWritable(pipe.write, word: 7))
        release.signal()
        #expect(await Self.wait(client.got), "the one-shot event reached its client")
        registration.remove(pipe.write)
        registration.end()
    }

    @Test func wakeMakesTheReactorTickItsClients() async throws {
        let reactor = ChildReactor(name: "test-client")
        let pipe = try #require(ChildPipe.output())
        defer { close(pipe.write) }
        let client = PipeClient(reactor, fd: pipe.read, needle: "never")
        #expect(await Self.wait(client.ticked))
        let before = client.state.withLock { $0.ticks }
        client.registration.wake()
        let ticked = await sleep(
            for: Self.bound,
            orUntil: {
                while client.state.withLock({ $0.ticks }) == before { _ = await Self.reactorThread(reactor) }
            })
        #expect(ticked == .signalled)
        client.registration.end()
        #expect(await Self.wait(client.detachedOnce))
    }

    @Test func clientsAndWatchedChildrenShareTheReactorThread() async throws {
        let reactor = ChildReactor(name: "test-client")
        let pipe = try #require(ChildPipe.output())
        let client = PipeClient(reactor, fd: pipe.read, needle: "done")
        let exitThread = Mutex<UInt>(0)
        let exited = Latch()
        // The child waits for a line, so its exit is seen on the reactor, after onExit.
        let gate = try #require(ChildPipe.input())
        let child = try reactor.spawn(
            ChildSpec(
                executable: "/bin/sh", arguments: ["/bin/sh", "-c", "read line; echo done"], environment: ["PATH=/usr/bin:/bin"],
                input: gate.read, output: pipe.write))
        close(pipe.write)
        close(gate.read)
        child.onExit { _ in
            exitThread.withLock { $0 = UInt(pthread_self()) }
            exited.open()
        }
        #expect(write(gate.write, "\n", 1) == 1)
        close(gate.write)
        #expect(await Self.wait(client.sawAll))
        #expect(await Self.wait(exited))
        let clientThreads = client.state.withLock { $0.threads }
        #expect(clientThreads == [exitThread.withLock { $0 }])
        client.registration.end()
        #expect(await Self.wait(client.detachedOnce))
    }

    /// Waits once for its descriptor to take bytes.
    final class WriterClient: ChildReactor.Client {
        let registration: ChildReactor.Registration
        let words = Mutex<[UInt64]>([])
        let writable = Latch()

        init(_ reactor: ChildReactor) {
            registration = reactor.register()
            registration.serve(self)
        }

        func ready(_ word: UInt64, scratch: UnsafeMutableRawBufferPointer) {
            words.withLock { $0.append(word) }
            writable.open()
        }

        func tick(now: ContinuousClock.Instant, scratch: UnsafeMutableRawBufferPointer) -> ContinuousClock.Instant? { nil }

        func detached() {}
    }

    @Test func aFullPipeWakesItsWriterOnceItDrains() async throws {
        let reactor = ChildReactor(name: "test-client")
        let pipe = try #require(ChildPipe.input())
        defer {
            close(pipe.read)
            close(pipe.write)
        }
        var chunk = [UInt8](repeating: 0x61, count: 4096)
        var written = 0
        while case let n = chunk.withUnsafeMutableBytes({ write(pipe.write, $0.baseAddress, $0.count) }), n > 0 { written += n }
        #expect(errno == EAGAIN, "the pipe is full")
        let client = WriterClient(reactor)
        #expect(client.registration.addWritable(pipe.write, word: 7))
        // A round through the reactor: still full, so no wake-up yet.
        _ = await Self.reactorThread(reactor)
        #expect(!client.writable.isOpen)
        // The read end blocks: take exactly what was written.
        while written > 0, case let n = chunk.withUnsafeMutableBytes({ read(pipe.read, $0.baseAddress, min($0.count, written)) }), n > 0 {
            written -= n
        }
        #expect(await Self.wait(client.writable))
        client.registration.remove(pipe.write)
        #expect(client.words.withLock { $0 } == [7], "one-shot: told once")
        client.registration.end()
    }
}

/// A blocking one-shot release for a job on the reactor's thread (a flag it polls, so
/// that the test needs no Foundation).
final class ReactorHold: Sendable {
    private let released = Mutex(false)

    func signal() { released.withLock { $0 = true } }

    /// Waits (polling every millisecond, bounded to 60 s) until ``signal()``.
    func wait() {
        for _ in 0..<60_000 where !released.withLock({ $0 }) { usleep(1000) }
    }
}
