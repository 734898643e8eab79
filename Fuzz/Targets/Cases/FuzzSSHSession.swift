import AgentSSH

/// What the SSH server reads of a client's bytes itself (swift-nio-ssh parses the protocol):
/// exec commands, `env` requests, decrypted messages through the rewriter, Xauthority files.
/// The first byte picks the case.
///
/// A command: never a trap; no command runs with an empty argv; a command without `#!`
/// runs as `/bin/sh -c <command>` exactly.
/// `env` requests: the manifest's `CODER` and the agent's own variables always win, the
/// stripped names never appear, and `SSH_CONNECTION` is the reference's fixed value.
/// The rewriter: never a trap; a message that is not a global request, channel open, open
/// failure or channel request passes untouched; a rewritten channel open is a `direct-tcpip`.
/// Xauthority: what parses encodes back to the same bytes.
/// An AES-GCM packet (a first byte of 0xF0 or more): never a trap; a sealed one whose padding
/// length is at least 4 and leaves room, in whole blocks, gives exactly its payload (through
/// the rewriter), anything else is refused; bytes not sealed with the key are refused.
public func fuzzSSHSession(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    if selector >= 0xF0 {
        aesGCMPacket(&input, sealed: selector & 1 == 1)
        return 0
    }
    if selector % 4 == 2 {
        let message = input.rest()
        let (inbound, outbound) = SSHFuzzing.rewrite(message)
        if let type = message.first, ![80, 90, 92, 98].contains(type) {
            require(inbound == message && outbound == message, "type \(type) was rewritten")
        }
        if message.first == 90, inbound != message {
            require(inbound.starts(with: [90, 0, 0, 0, 12] + Array("direct-tcpip".utf8)), "a rewritten open is not direct-tcpip")
        }
        return 0
    }
    if selector % 4 == 3 {
        let bytes = input.rest()
        if let encoded = SSHFuzzing.xauthority(bytes) { require(encoded == bytes, "an Xauthority file changed on a round trip") }
        return 0
    }
    if selector & 1 == 0 {
        let text = String(decoding: input.rest(), as: UTF8.self)
        let parsed = SSHFuzzing.command(text)
        require(!parsed.argv.isEmpty, "an empty argv")
        if !text.isEmpty, !text.contains("#!") {
            require(parsed.argv == ["/bin/sh", "-c", text], "argv \(parsed.argv) for \(text.debugDescription)")
        }
        return 0
    }
    var client: [(name: String, value: String)] = []
    while client.count < 32, !input.isEmpty {
        let name = String(decoding: input.data(maxLength: 16), as: UTF8.self)
        let value = String(decoding: input.data(maxLength: 32), as: UTF8.self)
        client.append((name, value))
    }
    let (environment, type) = SSHFuzzing.environment(client)
    require(environment["CODER"] == "true" && environment["AGENT"] == "a" && environment["PATH"] == "/usr/bin:/bin", "a protected variable changed")
    require(environment["CODER_SSH_SESSION_TYPE"] == nil && environment["CODER_CONTAINER"] == nil, "a stripped variable kept")
    require(environment["SSH_CONNECTION"] == "0.0.0.0 0 0.0.0.0 0", "SSH_CONNECTION changed")
    require(["ssh", "vscode", "jetbrains", "unknown"].contains(type), "session type \(type)")
    return 0
}

private func aesGCMPacket(_ input: inout FuzzInput, sealed: Bool) {
    let packet = input.rest()
    let opened = SSHFuzzing.openPacket(packet, sealed: sealed)
    if sealed {
        // Bytes the client's key never sealed (a 1 in 2^128 forgery aside) are refused.
        require(opened == nil, "a packet not sealed with the key was opened")
        return
    }
    guard let padding = packet.first.map(Int.init), padding >= 4, padding + 1 <= packet.count, packet.count % 16 == 0 else {
        require(opened == nil, "a packet with \(packet.first.map(String.init) ?? "no") padding bytes in \(packet.count) was opened")
        return
    }
    let payload = Array(packet[1..<(packet.count - padding)])
    require(opened == SSHFuzzing.rewrite(payload).inbound, "the payload changed on its way")
}
