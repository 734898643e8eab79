import AgentCore
import CDesktop
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The agent's own VNC connection to the desktop (libvncclient, in process): it sends
/// pointer and key events, so actions need no helper processes, and follows the
/// framebuffer's updates (for `settle_ms`). Screenshots do not come from its framebuffer,
/// which lags behind the screen; they are read from the X server (``XScreenReader``). One thread runs the message loop; every libvncclient call that reads
/// or writes the client's state happens under one lock; only that thread frees it.
///
/// Bound: the connect finishes within the client's timeout (``timeout``, 10 s, as the X
/// reads); the handshake, each event sent and each server message read may go that long
/// with no byte moving on the socket, and may last that long plus what their bytes take at
/// ``minimumRate`` (64 KiB/s), or fail with "did not answer within …" and the connection
/// with them (the next action connects again). So a large update or clipboard text that
/// keeps arriving is never cut short, while a server that stopped answering, stopped
/// reading what the agent sends, or trickles bytes below the floor never holds an action,
/// the lock or `close` much past ``timeout`` (a message of N bytes at the floor or faster:
/// ``timeout`` + N / ``minimumRate`` at most, and 120 s in all whatever the rate). A
/// thread of the C client's own keeps the
/// bound (`desktop_vnc_deadline_passed`).
///
/// Memory: the framebuffer (width × height × 4 bytes; 7.9 MiB at 1920×1080).
final class VNCClient: Sendable {
    /// The C client. Safety: the pointer is dereferenced only under `state`'s lock, and by
    /// the loop thread in `desktop_vnc_wait` (which reads only the socket); the loop thread
    /// alone frees it, after which it is nil.
    private struct Handle: @unchecked Sendable {
        var pointer: OpaquePointer?
    }

    private struct State {
        var handle = Handle()
        var failed = false
        /// Failed because a call ran past its deadline.
        var timedOut = false
        /// Updates seen, and when the last one arrived (for `settle_ms`).
        var updates: UInt64 = 0
        var lastUpdate = ContinuousClock.now
        /// Where the agent last put the pointer (RFB pointer events carry a position, so
        /// button events are sent there), and the buttons it holds. Where the pointer really
        /// is comes from the X server (``XScreenReader/pointer(display:)``).
        var pointer = (x: 0, y: 0)
        var buttons: Int32 = 0
    }

    private let state: Mutex<State>
    /// Set by `close`; read without the lock, so `close` never waits for a call under way.
    private let closing = Atomic<Bool>(false)
    private let finished = Latch()
    let port: Int
    /// How long one call on the connection may wait with no byte moving (and the connect).
    let timeout: Duration

    /// The silence bound of each call on the connection (connect, handshake, a send, one
    /// message read).
    static let defaultTimeout: Duration = .seconds(10)

    /// The slowest a call's bytes may move (bytes a second) beyond ``timeout``: a message
    /// of N bytes has ``timeout`` + N / this in all. Far below any working loopback.
    static let minimumRate = 64 * 1024

    /// A write the bound cuts short fails with EPIPE, and must not raise SIGPIPE (the
    /// daemon ignores it already; a process embedding the module may not).
    private static let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    private init(port: Int, timeout: Duration, handle: OpaquePointer) {
        self.port = port
        self.timeout = timeout
        var initial = State()
        initial.handle = Handle(pointer: handle)
        state = Mutex(initial)
    }

    /// Connects to 127.0.0.1:`port` (blocking handshake, on its own thread, within `timeout`
    /// of silence and `minimumRate`) and starts the loop.
    static func connect(port: Int, timeout: Duration = defaultTimeout, minimumRate: Int = minimumRate) async throws(DesktopError) -> VNCClient {
        Self.ignoreSIGPIPE
        let milliseconds = Int32(clamping: max(1, timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
        let result: Result<VNCClient, DesktopError> = await withCheckedContinuation { continuation in
            AgentThread.start(name: "desktop-vnc") {
                var error = [CChar](repeating: 0, count: 256)
                var timedOut: Int32 = 0
                guard let handle = desktop_vnc_connect("127.0.0.1", Int32(port), milliseconds, Int32(clamping: minimumRate), &timedOut, &error, error.count) else {
                    let failure =
                        timedOut != 0
                        ? Self.timeoutError(port: port, timeout: timeout)
                        : DesktopError(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
                    continuation.resume(returning: .failure(failure))
                    return
                }
                let client = VNCClient(port: port, timeout: timeout, handle: handle)
                // The pointer starts where X puts it: the middle of the screen.
                let (width, height) = (Int(desktop_vnc_width(handle)), Int(desktop_vnc_height(handle)))
                client.state.withLock { $0.pointer = (width / 2, height / 2) }
                continuation.resume(returning: .success(client))
                client.loop()
            }
        }
        return try result.get()
    }

    /// The error of a call that ran past its deadline.
    static func timeoutError(port: Int, timeout: Duration) -> DesktopError {
        DesktopError("the VNC server on 127.0.0.1:\(port) did not answer within \(timeout)", timedOut: true)
    }

    /// The message loop: wait (unlocked, 100 ms at most, so `close` is seen), then handle one
    /// message under the lock (within its deadline).
    private func loop() {
        while true {
            if closing.load(ordering: .relaxed) { break }
            let pointer = state.withLock { s -> OpaquePointer? in s.failed ? nil : s.handle.pointer }
            guard let pointer else { break }
            let ready = desktop_vnc_wait(pointer, 100_000)
            if ready < 0 {
                state.withLock { $0.failed = true }
                break
            }
            if ready == 0 { continue }
            state.withLock { s in
                guard !closing.load(ordering: .relaxed), let pointer = s.handle.pointer else { return }
                if desktop_vnc_handle(pointer) != 0 {
                    s.failed = true
                    s.timedOut = desktop_vnc_timed_out(pointer) != 0
                    return
                }
                let updates = desktop_vnc_updates(pointer)
                if updates != s.updates {
                    s.updates = updates
                    s.lastUpdate = .now
                }
            }
        }
        state.withLock { s in
            desktop_vnc_close(s.handle.pointer)
            s.handle.pointer = nil
            s.failed = true
        }
        finished.open()
    }

    /// The connection still works.
    var isUsable: Bool { !closing.load(ordering: .relaxed) && state.withLock { !$0.failed && $0.handle.pointer != nil } }

    /// Framebuffer updates received whole so far.
    var updatesReceived: UInt64 { state.withLock { $0.updates } }

    /// The connection failed because a call ran past its deadline.
    var timedOut: Bool { state.withLock { $0.timedOut } }

    /// Ends the loop and frees the client: within 100 ms, or once the call under way ends
    /// (within its deadline). Blocks no thread.
    func close() async {
        closing.store(true, ordering: .relaxed)
        await finished.wait()
    }

    /// The framebuffer's size.
    var size: DisplayGeometry {
        state.withLock { s in
            guard let pointer = s.handle.pointer else { return DisplayGeometry(width: 0, height: 0) }
            return DisplayGeometry(width: Int(desktop_vnc_width(pointer)), height: Int(desktop_vnc_height(pointer)))
        }
    }

    /// Moves the pointer (native coordinates), keeping the buttons held.
    func move(x: Int, y: Int) throws(DesktopError) {
        try send { s, pointer in
            s.pointer = (x, y)
            return desktop_vnc_pointer(pointer, Int32(x), Int32(y), s.buttons)
        }
    }

    /// Presses or releases RFB buttons (`mask`: 1 left, 2 middle, 4 right, 8/16 wheel up/down,
    /// 32/64 wheel left/right) where the pointer is.
    func button(_ mask: Int32, down: Bool) throws(DesktopError) {
        try send { s, pointer in
            s.buttons = down ? s.buttons | mask : s.buttons & ~mask
            return desktop_vnc_pointer(pointer, Int32(s.pointer.x), Int32(s.pointer.y), s.buttons)
        }
    }

    func key(_ keysym: UInt32, down: Bool) throws(DesktopError) {
        try send { _, pointer in desktop_vnc_key(pointer, keysym, down ? 1 : 0) }
    }

    /// Runs one send under the lock; a failed one fails the connection. Throws the timeout's
    /// error when a call ran past its deadline (this one, or one before it).
    private func send(_ body: (inout State, OpaquePointer) -> Int32) throws(DesktopError) {
        let (ok, timedOut) = state.withLock { s -> (Bool, Bool) in
            guard !closing.load(ordering: .relaxed), !s.failed, let pointer = s.handle.pointer else { return (false, s.timedOut) }
            if body(&s, pointer) != 0 {
                s.failed = true
                s.timedOut = desktop_vnc_timed_out(pointer) != 0
                return (false, s.timedOut)
            }
            return (true, false)
        }
        if timedOut { throw Self.timeoutError(port: port, timeout: timeout) }
        if !ok { throw DesktopError("the VNC connection to the desktop was lost") }
    }

    /// Waits until no framebuffer update has arrived for `quiet`, at most `timeout`;
    /// returns how long it waited. Polls every 10 ms.
    func settle(quiet: Duration, timeout: Duration) async -> Duration {
        let start = ContinuousClock.now
        // An update the action causes may still be in flight: count quiet from now at least.
        while ContinuousClock.now - start < timeout {
            let last = state.withLock { max($0.lastUpdate, start) }
            if ContinuousClock.now - last >= quiet { break }
            try? await Task.sleep(for: .milliseconds(10))
            if Task.isCancelled { break }
        }
        return ContinuousClock.now - start
    }
}
