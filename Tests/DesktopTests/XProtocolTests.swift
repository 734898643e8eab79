import AgentTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import Desktop

/// The agent's own X11 client (screenshots and `cursor_position` read the X server): the
/// setup reply parsed, odd replies refused rather than trapped, pixel formats converted,
/// and every call bounded against fake servers that stall or refuse.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct XProtocolTests {
    /// A setup reply as an X server sends it to a little-endian client: one screen with one
    /// depth and one TrueColor visual (the root's), 32 bits per pixel at depth 24.
    static func setupReply(width: Int = 64, height: Int = 48) -> [UInt8] {
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * UInt32($0)) & 0xFF) } }
        let vendor = Array("fake".utf8)
        var body: [UInt8] = le32(1) + le32(0x0040_0000) + le32(0x001F_FFFF) + le32(256) + le16(vendor.count) + le16(65535)
        body += [1, 1, 0, 0, 32, 32, 8, 255] + [0, 0, 0, 0] + vendor
        body += [24, 32, 32, 0, 0, 0, 0, 0]  // pixmap format: depth 24, 32 bpp, pad 32
        body += le32(0x100) + le32(0x20) + le32(0xFF_FFFF) + le32(0) + le32(0) + le16(width) + le16(height)
        body += le16(508) + le16(285) + le16(1) + le16(1) + le32(0x21) + [0, 0, 24, 1]
        body += [24, 0] + le16(1) + [0, 0, 0, 0]  // depth 24, one visual
        body += le32(0x21) + [4, 8] + le16(256) + le32(0xFF_0000) + le32(0xFF00) + le32(0xFF) + [0, 0, 0, 0]
        return [1, 0] + le16(11) + le16(0) + le16(body.count / 4) + body
    }

    @Test func theSetupReplyIsParsed() throws {
        let reply = Self.setupReply(width: 1920, height: 1080)
        #expect(XSetup.replyLength(header: Array(reply.prefix(8))) == reply.count)
        let setup = try XSetup.parse(reply)
        #expect(setup.root == 0x100 && setup.width == 1920 && setup.height == 1080)
        #expect(setup.format == XPixelFormat(bitsPerPixel: 32, scanlinePad: 32, bigEndian: false, redMask: 0xFF_0000, greenMask: 0xFF00, blueMask: 0xFF))
    }

    /// Every shortened reply (up to the visual's unused tail) is an error, never a trap.
    @Test func aShortSetupReplyIsAnErrorNotATrap() {
        let reply = Self.setupReply()
        for length in 0..<(reply.count - 4) {
            #expect(throws: DesktopError.self, "\(length) bytes") { try XSetup.parse(Array(reply.prefix(length))) }
        }
    }

    @Test func aRefusalSaysWhy() {
        let reason = Array("No protocol specified\n".utf8)
        let reply: [UInt8] = [0, UInt8(reason.count), 11, 0, 0, 0, 6, 0] + reason + [0, 0]
        #expect(throws: DesktopError("the X server refused the connection: No protocol specified")) { try XSetup.parse(reply) }
    }

    @Test func pixelFormatsBecomeRGBX() {
        // 32 bits, little-endian (B G R X in memory), as Xvnc -depth 24 on x86: in place.
        let lsb = XPixelFormat(bitsPerPixel: 32, scanlinePad: 32, bigEndian: false, redMask: 0xFF_0000, greenMask: 0xFF00, blueMask: 0xFF)
        var pixels: [UInt8] = [3, 2, 1, 0, 30, 20, 10, 0]
        lsb.convertToRGBX(&pixels, width: 2, height: 1)
        #expect(pixels == [1, 2, 3, 255, 10, 20, 30, 255])
        // 32 bits, big-endian (X R G B).
        let msb = XPixelFormat(bitsPerPixel: 32, scanlinePad: 32, bigEndian: true, redMask: 0xFF_0000, greenMask: 0xFF00, blueMask: 0xFF)
        pixels = [0, 1, 2, 3]
        msb.convertToRGBX(&pixels, width: 1, height: 1)
        #expect(pixels == [1, 2, 3, 255])
        // 16 bits 5-6-5, little-endian, rows padded to 32 bits (one pixel, two bytes of pad).
        let rgb565 = XPixelFormat(bitsPerPixel: 16, scanlinePad: 32, bigEndian: false, redMask: 0xF800, greenMask: 0x07E0, blueMask: 0x001F)
        #expect(rgb565.bytesPerRow(width: 1) == 4)
        pixels = [0x00, 0xF8, 9, 9, 0xE0, 0x07, 9, 9, 0x1F, 0x00, 9, 9]
        rgb565.convertToRGBX(&pixels, width: 1, height: 3)
        #expect(pixels == [255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255])
        #expect(!XPixelFormat(bitsPerPixel: 8, scanlinePad: 8, bigEndian: false, redMask: 0xE0, greenMask: 0x1C, blueMask: 0x03).isSupported)
        #expect(!XPixelFormat(bitsPerPixel: 32, scanlinePad: 32, bigEndian: false, redMask: 0xF0F000, greenMask: 0xFF00, blueMask: 0xFF).isSupported)
    }

    /// The image a fake server in `image` mode sends: `size` bytes, byte i being i mod 251.
    struct Paced {
        var size: Int
        /// Bytes sent at once, one piece every `intervalMs`.
        var piece: Int
        var intervalMs: Int
        /// Bytes sent in all (all of `size`, or fewer: then nothing more).
        var send: Int

        var pixels: [UInt8] { (0..<size).map { UInt8($0 % 251) } }
    }

    /// A fake X server on display `display` (abstract socket only), in `mode`: `silent`
    /// accepts and never answers; `stall` sends `reply` (a setup) and then nothing;
    /// `refuse` sends a refusal; `image` sends `reply`, reads a GetImage and answers it with
    /// the header of `image.size` bytes and then `image.send` of them, a piece at a time, and
    /// then nothing (it prints `sent <time>`, CLOCK_MONOTONIC in seconds, just before the
    /// last piece).
    static func fakeServer(display: Int, mode: String, reply: [UInt8] = [], image: Paced? = nil) async throws -> ChildProgram.Running {
        let script = """
            import socket, struct, sys, time
            display, mode, reply = int(sys.argv[1]), sys.argv[2], bytes.fromhex(sys.argv[3])
            if mode == 'image':
                size, piece, interval, send = (int(a) for a in sys.argv[4:8])
                image = bytes(i % 251 for i in range(size))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind('\\0/tmp/.X11-unix/X%d' % display)
            s.listen(8)
            print('ready', flush=True)
            def exactly(c, n):
                data = b''
                while len(data) < n:
                    more = c.recv(n - len(data))
                    if not more:
                        break
                    data += more
                return data
            held = []
            for _ in range(20):
                c, _ = s.accept()
                held.append(c)
                exactly(c, 12)
                if mode == 'stall':
                    c.sendall(reply)
                elif mode == 'refuse':
                    reason = b'No protocol specified\\n'
                    c.sendall(struct.pack('<BBHHH', 0, len(reason), 11, 0, (len(reason) + 2) // 4) + reason + b'\\0\\0')
                elif mode == 'image':
                    c.sendall(reply)
                    exactly(c, 20)
                    # The reply's header: sequence 1, depth 24, the length in 4-byte units.
                    c.sendall(struct.pack('<BBHII', 1, 24, 1, size // 4, 0x21) + bytes(20))
                    for start in range(0, send, piece):
                        if start > 0:
                            time.sleep(interval / 1000)
                        if start + piece >= send:
                            print('sent %.6f' % time.monotonic(), flush=True)
                        c.sendall(image[start:min(start + piece, send)])
            time.sleep(60)
            """
        let hex = reply.map { String(format: "%02x", $0) }.joined()
        var arguments = ["python3", "-c", script, "\(display)", mode, hex]
        if let image { arguments += [image.size, image.piece, image.intervalMs, image.send].map(String.init) }
        let server = try #require(ChildProgram.start(arguments))
        let line = await onThread { server.readLine(limit: 16) }
        #expect(line == "ready")
        return server
    }

    /// A display number with no X server socket file (the client tries the file first).
    static func unusedDisplay() -> Int {
        for _ in 0..<100 {
            let candidate = Int.random(in: 5000..<6000)
            if !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(candidate)") { return candidate }
        }
        return 5999
    }

    /// What a blocking call said: "ok" or its error.
    static func outcome(_ body: @escaping @Sendable () throws(DesktopError) -> Void) async -> String {
        await onThread { () -> String in
            do throws(DesktopError) {
                try body()
                return "ok"
            } catch {
                return error.description
            }
        }
    }

    /// A server that accepts and never answers fails the call at the bound.
    @Test func aSilentServerFailsTheCallAtTheBound() async throws {
        let display = Self.unusedDisplay()
        let server = try await Self.fakeServer(display: display, mode: "silent")
        defer { server.kill() }
        let said = await Self.outcome { () throws(DesktopError) in _ = try XScreenReader.screen(display: display, within: .milliseconds(300)) }
        #expect(said == "the X server of display :\(display) did not answer within 0.3 seconds")
    }

    /// A server that sets up the connection and then never sends the image: the screenshot
    /// fails at the bound (never an older image), and so does the pointer query.
    @Test func noImageInTimeIsAnErrorNotAnOldImage() async throws {
        let display = Self.unusedDisplay()
        let server = try await Self.fakeServer(display: display, mode: "stall", reply: Self.setupReply())
        defer { server.kill() }
        let size = await Self.outcome { () throws(DesktopError) in
            let screen = try XScreenReader.screen(display: display, within: .seconds(5))
            guard screen == DisplayGeometry(width: 64, height: 48) else { throw DesktopError("screen \(screen)") }
        }
        #expect(size == "ok")
        let capture = await Self.outcome { () throws(DesktopError) in
            _ = try XScreenReader.capture(display: display, within: .milliseconds(300)) { screen in
                XScreenReader.Rect(x: 0, y: 0, width: screen.width, height: screen.height)
            }
        }
        #expect(capture == "the X server of display :\(display) did not answer within 0.3 seconds")
        let pointer = await Self.outcome { () throws(DesktopError) in _ = try XScreenReader.pointer(display: display, within: .milliseconds(300)) }
        #expect(pointer == "the X server of display :\(display) did not answer within 0.3 seconds")
    }

    /// CLOCK_MONOTONIC in milliseconds (Python's `time.monotonic()` reads the same clock).
    static func monotonicMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// What a blocking call said ("ok" or its error) and when it ended (CLOCK_MONOTONIC,
    /// ms), once it has.
    final class Ended: Sendable {
        let value = Mutex<(said: String, at: Int64)?>(nil)
        var said: String? { value.withLock { $0?.said } }
        var at: Int64? { value.withLock { $0?.at } }
    }

    /// Starts `body` on a thread of its own.
    static func started(_ body: @escaping @Sendable () throws(DesktopError) -> Void) -> Ended {
        let ended = Ended()
        Thread {
            var said = "ok"
            do throws(DesktopError) {
                try body()
            } catch {
                said = error.description
            }
            let at = monotonicMilliseconds()
            ended.value.withLock { $0 = (said, at) }
        }.start()
        return ended
    }

    /// The bound is on silence, not on the reply's length: a 256 000-byte image arriving in
    /// pieces of 16 000 bytes, one every 100 ms, takes 1.5 s whole, longer than the call's
    /// 1 s bound, and is read whole. Before, the call failed 1 s after it began, however
    /// steadily the image came (a full screen from a starved X server: a 500).
    @Test func anImageThatKeepsArrivingPastTheBoundIsReadWhole() async throws {
        let display = Self.unusedDisplay()
        let image = Paced(size: 320 * 200 * 4, piece: 16_000, intervalMs: 250, send: 320 * 200 * 4)
        let server = try await Self.fakeServer(display: display, mode: "image", reply: Self.setupReply(width: 320, height: 200), image: image)
        defer { server.kill() }
        let pixels = image.pixels
        let began = Self.monotonicMilliseconds()
        // A low floor (16 KiB/s: 3 s + 15.6 s in all for this image): only the silence bound
        // is under test here, however slowly a loaded machine runs the server (a pause of
        // almost 3 s between its pieces is still no silence).
        let call = Self.started { () throws(DesktopError) in
            let read = try XScreenReader.capture(display: display, within: .seconds(3), minimumRate: 16 * 1024) { screen in
                XScreenReader.Rect(x: 0, y: 0, width: screen.width, height: screen.height)
            }
            guard read.pixels == pixels else { throw DesktopError("the image read is not the one sent") }
        }
        #expect(await eventually(timeout: .seconds(60)) { call.said != nil })
        #expect(call.said == "ok")
        // It did take longer than the bound (15 pauses of 250 ms at least).
        #expect(call.at.map { $0 - began > 3000 } == true, "\(String(describing: call.at)) - \(began)")
    }

    /// A reply that stops halfway fails the call the bound after its last byte, not at the
    /// bound after the call began (it was still arriving then), nor when its bytes have run
    /// out of time at the floor (16 KiB/s here: 1 s + 15.6 s after it began).
    @Test func anImageThatStopsIsCutOffTheBoundAfterItsLastByte() async throws {
        let display = Self.unusedDisplay()
        let image = Paced(size: 320 * 400 * 4, piece: 16_000, intervalMs: 100, send: 16 * 16_000)
        let server = try await Self.fakeServer(display: display, mode: "image", reply: Self.setupReply(width: 320, height: 400), image: image)
        defer { server.kill() }
        let call = Self.started { () throws(DesktopError) in
            _ = try XScreenReader.capture(display: display, within: .seconds(1), minimumRate: 16 * 1024) { screen in
                XScreenReader.Rect(x: 0, y: 0, width: screen.width, height: screen.height)
            }
        }
        #expect(await eventually(timeout: .seconds(60)) { call.said != nil })
        #expect(call.said == "the X server of display :\(display) did not answer within \(Duration.seconds(1))")
        // When the server was about to send its last piece (CLOCK_MONOTONIC, as `at`).
        let line = await onThread { server.readLine(limit: 64, timeout: .seconds(10)) }
        let sent = line.hasPrefix("sent ") ? Double(line.dropFirst(5)).map { Int64($0 * 1000) } : nil
        let after = try #require(call.at.flatMap { at in sent.map { at - $0 } }, "\(line)")
        // No earlier than the bound after the last byte (less a millisecond of rounding);
        // later only by the scheduling of a loaded machine, far from the floor's 15 s.
        #expect(after >= 998 && after < 6000, "failed \(after) ms after the last byte")
    }

    @Test func aRefusingServerOrNoneSaysWhy() async throws {
        let display = Self.unusedDisplay()
        let server = try await Self.fakeServer(display: display, mode: "refuse")
        let said = await Self.outcome { () throws(DesktopError) in _ = try XScreenReader.pointer(display: display) }
        server.kill()
        #expect(said == "the X server refused the connection: No protocol specified")
        let none = await Self.outcome { () throws(DesktopError) in _ = try XScreenReader.pointer(display: display) }
        #expect(none.hasPrefix("cannot connect to X display :\(display): connect: "), "\(none)")
        #expect(await Self.outcome { () throws(DesktopError) in _ = try XScreenReader.pointer(display: -1) } == "the desktop's X display is unknown")
    }
}
