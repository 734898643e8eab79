import CAgentTLS

/// One connection's OpenSSL state: ciphertext fed in, ciphertext taken out, plaintext read
/// and written. Sans-IO; used on its channel's event loop only.
final class TLSSession {
    /// What a handshake step or a read ended with.
    enum Step: Equatable {
        case done
        case wantRead
        case closed
        case failed(String)
    }

    private let pointer: OpaquePointer
    // Keeps the context alive as long as the session (OpenSSL counts its own reference too).
    private let context: TLSContext

    init(context: TLSContext, server: Bool, serverName: String?) throws(TLSError) {
        let made: OpaquePointer? =
            if let serverName { agent_tls_session_new(context.pointer, server ? 1 : 0, serverName) } else {
                agent_tls_session_new(context.pointer, server ? 1 : 0, nil)
            }
        guard let made else { throw .configuration("cannot start a TLS session (server name \(serverName ?? "none"))") }
        pointer = made
        self.context = context
    }

    deinit { agent_tls_session_free(pointer) }

    /// Adds the peer's ciphertext; false when there was no memory for it.
    func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return true }
        return agent_tls_feed(pointer, base.assumingMemoryBound(to: UInt8.self), bytes.count) == 1
    }

    var pendingOutput: Int { agent_tls_pending_output(pointer) }

    /// Moves up to `buffer.count` ciphertext bytes for the peer into `buffer`.
    func takeOutput(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        return agent_tls_take_output(pointer, base.assumingMemoryBound(to: UInt8.self), buffer.count)
    }

    func handshake() -> Step {
        step(Int(agent_tls_handshake(pointer)))
    }

    /// Plaintext into `buffer`: a count above 0, or why there is none.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> (Int, Step) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return (0, .wantRead) }
        let result = agent_tls_read(pointer, base.assumingMemoryBound(to: UInt8.self), buffer.count)
        return result > 0 ? (result, .done) : (0, step(result))
    }

    /// Encrypts all of `bytes` into the output.
    func write(_ bytes: UnsafeRawBufferPointer) -> Step {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return .done }
        return step(Int(agent_tls_write(pointer, base.assumingMemoryBound(to: UInt8.self), bytes.count)))
    }

    /// Queues close_notify; false before the handshake finished (there is nothing to close).
    func close() -> Bool { agent_tls_close(pointer) == 1 }

    /// The protocol ALPN chose.
    var negotiatedProtocol: String? {
        var length = 0
        guard let bytes = agent_tls_alpn(pointer, &length) else { return nil }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: length), as: UTF8.self)
    }

    /// The peer leaf certificate's DNS and IP names; nil when it sent no certificate.
    var peerNames: [SubjectAlternativeName]? {
        SubjectAlternativeName.read { out, capacity in agent_tls_peer_names(pointer, out, capacity) }
    }

    private func step(_ result: Int) -> Step {
        switch result {
        case AGENT_TLS_OK: return .done
        case AGENT_TLS_WANT_READ: return .wantRead
        case AGENT_TLS_CLOSED: return .closed
        default:
            var message = [CChar](repeating: 0, count: 320)
            agent_tls_last_error(pointer, &message, message.count)
            return .failed(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }
}
