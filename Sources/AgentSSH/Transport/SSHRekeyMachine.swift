import NIOCore

/// When a connection's channel traffic must wait for a client's key exchange (sans-IO:
/// decrypted and encrypted messages and ends of reads in, what to do out).
///
/// swift-nio-ssh refuses every channel message from the client's KEXINIT until its own
/// NEWKEYS, and drops it: a channel's data is lost with the window it used. Channels hold
/// their own operations (``RekeyHold``) while ``isHolding``, but swift-nio-ssh also writes for
/// them when a read ends (data freed by a window adjust earlier in the read, window adjusts
/// for data they consumed). So a KEXINIT is not parsed in the read that brings it: it becomes
/// an `SSH_MSG_IGNORE`, with every packet after it in that read; when the read has ended and
/// those writes are out, the channels hold and the deferred packets are parsed; when the
/// agent's NEWKEYS has gone, the channels let go.
///
/// Only a rekey reaches this machine: the first key exchange is in clear, before any cipher.
struct SSHRekeyMachine {
    enum Phase: Equatable {
        /// Channels write as they like.
        case open
        /// A KEXINIT was deferred in this read (and what came after it).
        case deferring
        /// The deferred packets are being parsed; channels hold.
        case replaying
        /// The exchange runs; channels hold until the agent's NEWKEYS has gone.
        case holding
    }

    /// What the connection does when a read has ended.
    enum Step: Equatable {
        case none
        /// Feed `count` marker packets, each of which parses as the next deferred packet.
        case replay(count: Int)
        /// Let the channels go.
        case release
    }

    static let ignoreType: UInt8 = 2
    static let kexInitType: UInt8 = 20
    static let newKeysType: UInt8 = 21
    /// Bounds on what one rekey defers: a KEXINIT is a few hundred bytes, and a client that
    /// follows RFC 4253 §7.1 sends nothing else until the agent's KEXINIT (256 KiB is the
    /// clear key exchange's packet bound).
    static let maxDeferredPackets = 16
    static let maxDeferredBytes = 256 * 1024

    private(set) var phase = Phase.open
    private var deferred: [ByteBuffer] = []
    private var sentNewKeys = false

    /// Whether channels must hold their operations now.
    var isHolding: Bool { phase == .replaying || phase == .holding }

    /// A decrypted packet's payload; returns what swift-nio-ssh should parse in its place.
    mutating func inbound(_ payload: ByteBuffer) throws -> ByteBuffer {
        switch phase {
        case .open:
            guard payload.getInteger(at: payload.readerIndex, as: UInt8.self) == Self.kexInitType else { return payload }
            phase = .deferring
        case .deferring: break
        case .replaying, .holding: return payload
        }
        let deferredBytes = deferred.reduce(0) { $0 + $1.readableBytes }
        guard deferred.count < Self.maxDeferredPackets, deferredBytes + payload.readableBytes <= Self.maxDeferredBytes else {
            throw SSHRekeyError.tooMuchDeferred
        }
        deferred.append(payload)
        return Self.ignore
    }

    /// The next deferred packet, in place of a marker packet.
    mutating func replayed() throws -> ByteBuffer {
        guard phase == .replaying, !deferred.isEmpty else { throw SSHRekeyError.unexpectedMarker }
        let next = deferred.removeFirst()
        if deferred.isEmpty { phase = .holding }
        return next
    }

    /// A message the agent is sending (its type byte).
    mutating func outbound(type: UInt8) {
        if type == Self.newKeysType, isHolding { sentNewKeys = true }
    }

    /// A read has ended (swift-nio-ssh has written what it had for the channels).
    mutating func readComplete() -> Step {
        switch phase {
        case .deferring:
            phase = .replaying
            return .replay(count: deferred.count)
        case .holding where sentNewKeys:
            phase = .open
            sentNewKeys = false
            return .release
        case .open, .replaying, .holding:
            return .none
        }
    }

    /// The connection has closed: nothing is held or deferred any more.
    mutating func connectionClosed() {
        phase = .open
        deferred = []
        sentNewKeys = false
    }

    /// `SSH_MSG_IGNORE` with empty data.
    static var ignore: ByteBuffer { ByteBuffer(bytes: [ignoreType, 0, 0, 0, 0]) }
}

/// Why a rekey ended the connection.
enum SSHRekeyError: Error, Equatable {
    /// The client sent more than a key exchange after its KEXINIT without waiting.
    case tooMuchDeferred
    /// A marker packet where none was fed, or bytes that are not one where one was.
    case unexpectedMarker
}
