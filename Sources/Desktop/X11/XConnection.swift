/// One short-lived connection to the desktop's X server, speaking the core X11 protocol
/// itself over an ``XSocket``: the connection setup, then requests and their replies.
///
/// Why not libX11 or xcb: both wait for the server with no time limit (a server that stops
/// answering would hold the thread for good), and libX11's default error handlers end the
/// process. Here every wait is bounded by the connection's one deadline (``XSocket``: a
/// silence bound, stretched by the bytes that keep arriving, up to a ceiling), and nothing
/// is process-wide. Blocking: call it off the cooperative pool.
///
/// Memory: a reply is read into one buffer of its announced length, refused past the
/// caller's `maxLength` before anything is allocated.
final class XConnection {
    let setup: XSetup
    private let socket: XSocket
    /// The sequence number of the last request sent (the first is 1).
    private var sequence: UInt16 = 0

    /// Connects to display `:display` and reads its setup. The connection, from here to its
    /// last reply, may go `timeout` with nothing arriving, and may last `timeout` plus what
    /// its bytes take at `floor` bytes a second, and 120 s in all (``XSocket``).
    init(display: Int, timeout: Duration, floor: Int) throws(DesktopError) {
        guard display >= 0 else { throw DesktopError("the desktop's X display is unknown") }
        socket = try XSocket(display: display, timeout: timeout, floor: floor)
        try socket.write(XSetup.request)
        let header = try socket.read(8)
        let length = XSetup.replyLength(header: header)
        // A setup reply lists visuals and formats: kilobytes; 1 MiB is far beyond any.
        guard length <= 1 << 20 else { throw DesktopError("the X server's setup reply is too long (\(length) bytes)") }
        setup = try XSetup.parse(header + socket.read(length - 8))
    }

    /// Sends `request` (whole 4-byte units, its length field set) and returns its reply's
    /// 32-byte header and the data after it. An X error, a reply with more than `maxLength`
    /// bytes of data, a closed connection or the connection's deadline fail it. Events
    /// (some, such as MappingNotify, go to every client) are skipped.
    func roundTrip(_ request: [UInt8], maxLength: Int) throws(DesktopError) -> (header: [UInt8], data: [UInt8]) {
        sequence &+= 1
        try socket.write(request)
        // Events come only unasked-for (none is selected): a few at most; a server that
        // floods them fails the call instead of holding it.
        for _ in 0..<Self.maxSkippedEvents {
            let packet = try socket.read(32)
            let bytes = XBytes(packet)
            let extra = Int(bytes.uint32(4) ?? 0) * 4
            switch packet[0] {
            case 0:
                throw DesktopError("the X server answered request \(packet[10]) with error \(packet[1])")
            case 1:
                guard bytes.uint16(2) == sequence else { throw DesktopError("the X server answered out of order") }
                guard extra <= maxLength else {
                    throw DesktopError("the X server's reply has \(extra) bytes, more than the \(maxLength) expected")
                }
                return (packet, try socket.read(extra))
            default:
                // A GenericEvent (35) carries more bytes; other events are 32.
                if packet[0] & 0x7F == 35 {
                    guard extra <= 1 << 20 else { throw DesktopError("the X server sent an event too long to skip") }
                    _ = try socket.read(extra)
                }
            }
        }
        throw DesktopError("the X server sent more than \(Self.maxSkippedEvents) events before its reply")
    }

    static let maxSkippedEvents = 1024
}
