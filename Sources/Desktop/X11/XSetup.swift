import AgentCore

/// What the agent needs from an X server's connection setup (X11 protocol, "Connection
/// Setup"): the first screen's root window, its size, and how its pixels are laid out.
/// Pure: builds the setup request and parses the reply's bytes; every read is checked
/// against the reply's length, so a short or odd reply is an error, never a trap.
struct XSetup: Sendable, Equatable {
    var root: UInt32
    var width: Int
    var height: Int
    var format: XPixelFormat

    /// The client's setup request: little-endian byte order, protocol 11.0, no
    /// authorization (the agent's desktops run without it: `Xvnc` with no `-auth`, and
    /// portabledesktop's with `-ac`).
    static let request: [UInt8] = [0x6C, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0]

    /// The length of the whole reply from its first 8 bytes (the fixed prefix of every
    /// setup answer, success or not).
    static func replyLength(header: [UInt8]) -> Int {
        8 + Int(XBytes(header).uint16(6, bigEndian: false) ?? 0) * 4
    }

    /// Parses a whole setup reply (as sent to a little-endian client).
    static func parse(_ reply: [UInt8]) throws(DesktopError) -> XSetup {
        let bytes = XBytes(reply)
        guard let status = bytes.uint8(0) else { throw DesktopError("the X server sent a short setup reply") }
        guard status == 1 else {
            // Failed (0): reason length at byte 1, reason from byte 8; Authenticate (2): from byte 8.
            let length = status == 0 ? Int(bytes.uint8(1) ?? 0) : max(0, reply.count - 8)
            let reason = bytes.string(8, length) ?? ""
            throw DesktopError("the X server refused the connection: \(reason.trimmingWhitespace())")
        }
        guard let vendorLength = bytes.uint16(24), let screens = bytes.uint8(28), let formats = bytes.uint8(29),
            let imageOrder = bytes.uint8(30), screens > 0
        else { throw DesktopError("the X server sent a malformed setup reply") }
        var offset = 40 + (Int(vendorLength) + 3) / 4 * 4
        var pixmapFormats: [(depth: UInt8, bitsPerPixel: Int, pad: Int)] = []
        for _ in 0..<formats {
            guard let depth = bytes.uint8(offset), let bpp = bytes.uint8(offset + 1), let pad = bytes.uint8(offset + 2) else {
                throw DesktopError("the X server sent a malformed setup reply")
            }
            pixmapFormats.append((depth, Int(bpp), Int(pad)))
            offset += 8
        }
        // The first screen.
        guard let root = bytes.uint32(offset), let width = bytes.uint16(offset + 20), let height = bytes.uint16(offset + 22),
            let rootVisual = bytes.uint32(offset + 32), let rootDepth = bytes.uint8(offset + 38), let depths = bytes.uint8(offset + 39)
        else { throw DesktopError("the X server sent a malformed setup reply") }
        offset += 40
        var masks: (UInt32, UInt32, UInt32)?
        for _ in 0..<depths {
            guard let visuals = bytes.uint16(offset + 2) else { throw DesktopError("the X server sent a malformed setup reply") }
            offset += 8
            for _ in 0..<visuals {
                guard let id = bytes.uint32(offset), let red = bytes.uint32(offset + 8), let green = bytes.uint32(offset + 12),
                    let blue = bytes.uint32(offset + 16)
                else { throw DesktopError("the X server sent a malformed setup reply") }
                if id == rootVisual { masks = (red, green, blue) }
                offset += 24
            }
        }
        guard let masks, let pixmap = pixmapFormats.first(where: { $0.depth == rootDepth }) else {
            throw DesktopError("the X server's root visual or its pixmap format is missing from the setup reply")
        }
        let format = XPixelFormat(
            bitsPerPixel: pixmap.bitsPerPixel, scanlinePad: pixmap.pad, bigEndian: imageOrder == 1,
            redMask: masks.0, greenMask: masks.1, blueMask: masks.2)
        guard format.isSupported else {
            throw DesktopError("unsupported X pixel format: depth \(rootDepth), \(pixmap.bitsPerPixel) bits per pixel")
        }
        return XSetup(root: root, width: Int(width), height: Int(height), format: format)
    }
}
