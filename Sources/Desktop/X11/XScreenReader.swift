import NIOPosix

/// Reads the screen and the pointer straight from the desktop's X server: what it answers
/// is the screen as it is when it handles the request, so a screenshot or `cursor_position`
/// always shows the state after every drawing request the server finished before the call
/// began (the VNC framebuffer lagged one update behind: the client only learns of a change
/// when the server sends it, and TigerVNC merges and delays updates).
///
/// Bound: each call (connect, setup, request, reply) may go ``timeout`` with no byte from
/// the X server, and may last ``timeout`` plus what its bytes take at ``minimumRate``, and
/// 120 s in all, or it fails with "did not answer within …" (counted in
/// `agent_desktop_x_timeouts_total`); never a stale image. So a full-screen image (8 MiB at
/// 1920×1080) that keeps arriving on a starved host is not cut short, while a server that
/// stops answering fails the call ``timeout`` after its last byte (``XSocket``, the VNC
/// client's rule). Blocking: call off the cooperative pool. One connection per call (about
/// a millisecond on a local socket): nothing to keep in step across desktops and failures.
enum XScreenReader {
    /// How long one capture or pointer query may go with no byte from the X server (a
    /// pointer query or a screen size, a few kilobytes, takes about that long in all).
    static let timeout: Duration = .seconds(10)

    /// The slowest the X server's bytes may arrive (bytes a second) beyond ``timeout``: a
    /// reply of N bytes has ``timeout`` + N / this in all. The VNC connection's floor; far
    /// below any working unix socket (8 MiB take 5 to 10 ms).
    static let minimumRate = VNCClient.minimumRate

    /// An X rectangle (pixels of the root window).
    struct Rect: Sendable, Equatable {
        var x: Int
        var y: Int
        var width: Int
        var height: Int
    }

    /// What a capture read: the screen's size then, the part captured and its pixels, 4
    /// bytes each with red, green and blue at `channels` (nil when `area` chose not to
    /// capture).
    struct Image {
        var screen: DisplayGeometry
        var rect: Rect
        var pixels: [UInt8]?
        var channels: PixelChannels = .rgbx
    }

    /// The part of the root window `area` picks for the screen's size at that moment (nil:
    /// none), 4 bytes a pixel: the X server's own rows when its pixels are 32 bits with byte
    /// channels (``XPixelFormat/channels(width:)``), else converted to RGBX. Memory: one buffer of
    /// `width × height × 4` bytes (the X reply, converted in place when it must be), sides at
    /// most ``DesktopLimits/maxSide``. `bound` and `floor`: the silence bound and the floor
    /// of the call (``timeout``, ``minimumRate``).
    static func capture(
        display: Int, within bound: Duration = timeout, minimumRate floor: Int = XScreenReader.minimumRate,
        area: (DisplayGeometry) -> Rect?
    ) throws(DesktopError) -> Image {
        let connection = try XConnection(display: display, timeout: bound, floor: floor)
        let setup = connection.setup
        let screen = DisplayGeometry(width: setup.width, height: setup.height)
        guard let rect = area(screen) else { return Image(screen: screen, rect: Rect(x: 0, y: 0, width: 0, height: 0), pixels: nil) }
        guard rect.x >= 0, rect.y >= 0, rect.width > 0, rect.height > 0, rect.width <= DesktopLimits.maxSide,
            rect.height <= DesktopLimits.maxSide, rect.x + rect.width <= setup.width, rect.y + rect.height <= setup.height
        else { throw DesktopError("cannot capture \(rect.width)x\(rect.height) at \(rect.x),\(rect.y) of a \(setup.width)x\(setup.height) screen") }
        let expected = setup.format.bytesPerRow(width: rect.width) * rect.height
        // GetImage (73): ZPixmap, the root window, the rectangle, all planes.
        var request: [UInt8] = [73, 2]
        request += le16(5) + le32(setup.root) + le16(rect.x) + le16(rect.y) + le16(rect.width) + le16(rect.height)
        request += le32(0xFFFF_FFFF)
        var reply = try connection.roundTrip(request, maxLength: expected).data
        guard reply.count == expected else {
            throw DesktopError("the X server sent \(reply.count) bytes of image, not the \(expected) of \(rect.width)x\(rect.height)")
        }
        if let channels = setup.format.channels(width: rect.width) {
            return Image(screen: screen, rect: rect, pixels: reply, channels: channels)
        }
        setup.format.convertToRGBX(&reply, width: rect.width, height: rect.height)
        return Image(screen: screen, rect: rect, pixels: reply)
    }

    /// Where the pointer is on the root window, and the screen's size.
    static func pointer(display: Int, within bound: Duration = timeout) throws(DesktopError) -> (x: Int, y: Int, screen: DisplayGeometry) {
        let connection = try XConnection(display: display, timeout: bound, floor: minimumRate)
        let setup = connection.setup
        // QueryPointer (38) on the root window; root-x and root-y at bytes 16 and 18.
        let header = try connection.roundTrip([38, 0] + le16(2) + le32(setup.root), maxLength: 0).header
        let bytes = XBytes(header)
        guard let x = bytes.int16(16), let y = bytes.int16(18) else { throw DesktopError("the X server sent a short pointer reply") }
        return (x, y, DisplayGeometry(width: setup.width, height: setup.height))
    }

    /// The screen's size now (from the connection setup alone).
    static func screen(display: Int, within bound: Duration = timeout) throws(DesktopError) -> DisplayGeometry {
        let setup = try XConnection(display: display, timeout: bound, floor: minimumRate).setup
        return DisplayGeometry(width: setup.width, height: setup.height)
    }

    /// Runs `body` (blocking X work, bounded as above) on the thread pool, never on
    /// the cooperative threads.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws(DesktopError) -> T) async throws(DesktopError) -> T {
        let result = try? await NIOThreadPool.singleton.runIfActive { () -> Result<T, DesktopError> in
            do throws(DesktopError) {
                return .success(try body())
            } catch {
                return .failure(error)
            }
        }
        guard let result else { throw DesktopError("the agent is shutting down") }
        return try result.get()
    }

    private static func le16(_ value: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)] }
    private static func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
}
