import AgentTestSupport
import Foundation
import Testing

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

    /// A fake X server on display `display` (abstract socket only), in `mode`: `silent`
    /// accepts and never answers; `stall` sends `reply` (a setup) and then nothing;
    /// `refuse` sends a refusal.
    static func fakeServer(display: Int, mode: String, reply: [UInt8] = []) async throws -> ChildProgram.Running {
        let script = """
            import socket, struct, sys, time
            display, mode, reply = int(sys.argv[1]), sys.argv[2], bytes.fromhex(sys.argv[3])
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind('\\0/tmp/.X11-unix/X%d' % display)
            s.listen(8)
            print('ready', flush=True)
            held = []
            for _ in range(20):
                c, _ = s.accept()
                held.append(c)
                c.recv(12)
                if mode == 'stall':
                    c.sendall(reply)
                elif mode == 'refuse':
                    reason = b'No protocol specified\\n'
                    c.sendall(struct.pack('<BBHHH', 0, len(reason), 11, 0, (len(reason) + 2) // 4) + reason + b'\\0\\0')
            time.sleep(60)
            """
        let hex = reply.map { String(format: "%02x", $0) }.joined()
        let server = try #require(ChildProgram.start(["python3", "-c", script, "\(display)", mode, hex]))
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
