import WireGuard

/// Bytes from hexadecimal text (spaces and newlines ignored); traps on bad input (test data).
func hexBytes(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8.filter { !$0.isWhitespaceASCII })
    precondition(digits.count % 2 == 0, "odd hex length")
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

extension UInt8 {
    var isWhitespaceASCII: Bool { self == 0x20 || self == 0x0a || self == 0x09 || self == 0x0d }
}

extension Array where Element == UInt8 {
    /// Lowercase hexadecimal.
    var hex: String { map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
}

/// An IPv6 packet: fixed header (hop limit 64) and `payload`.
func ipv6Packet(source: IPAddress, destination: IPAddress, nextHeader: UInt8, payload: [UInt8]) -> [UInt8] {
    var packet: [UInt8] = [0x60, 0, 0, 0, UInt8(payload.count >> 8), UInt8(payload.count & 0xff), nextHeader, 64]
    packet += source.bytes + destination.bytes + payload
    return packet
}

/// An IPv4 packet (20-byte header, checksum left 0: nothing here checks it).
func ipv4Packet(source: IPAddress, destination: IPAddress, protocolNumber: UInt8, payload: [UInt8]) -> [UInt8] {
    let total = 20 + payload.count
    var packet: [UInt8] = [0x45, 0, UInt8(total >> 8), UInt8(total & 0xff), 0, 0, 0, 0, 64, protocolNumber, 0, 0]
    packet += source.bytes + destination.bytes + payload
    return packet
}

/// The Internet checksum over an ICMPv6 message with its pseudo-header.
func icmpv6Checksum(source: IPAddress, destination: IPAddress, message: [UInt8]) -> UInt16 {
    var pseudo = source.bytes + destination.bytes
    let length = UInt32(message.count)
    pseudo += [UInt8(length >> 24), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff), UInt8(length & 0xff), 0, 0, 0, 58]
    var data = pseudo + message
    if data.count % 2 == 1 { data.append(0) }
    var sum: UInt32 = 0
    for i in stride(from: 0, to: data.count, by: 2) { sum += UInt32(data[i]) << 8 | UInt32(data[i + 1]) }
    while sum >> 16 != 0 { sum = (sum & 0xffff) + (sum >> 16) }
    return ~UInt16(sum)
}

/// An ICMPv6 echo request (type 128) or reply (129) packet with a valid checksum.
func icmpv6Echo(reply: Bool, source: IPAddress, destination: IPAddress, identifier: UInt16, sequence: UInt16, data: [UInt8]) -> [UInt8] {
    var message: [UInt8] = [reply ? 129 : 128, 0, 0, 0, UInt8(identifier >> 8), UInt8(identifier & 0xff), UInt8(sequence >> 8), UInt8(sequence & 0xff)]
    message += data
    let checksum = icmpv6Checksum(source: source, destination: destination, message: message)
    message[2] = UInt8(checksum >> 8)
    message[3] = UInt8(checksum & 0xff)
    return ipv6Packet(source: source, destination: destination, nextHeader: 58, payload: message)
}
