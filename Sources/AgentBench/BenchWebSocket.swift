import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A blocking RFC 6455 client to 127.0.0.1 for the benchmarks: text messages in, masked
/// frames out, pings answered. Every read is bounded by its timeout.
final class BenchWebSocket {
    private let fd: Int32
    private var buffer: [UInt8] = []

    /// Connects and upgrades `path` with extra `headers`; nil if refused.
    init?(port: Int, path: String, headers: [(String, String)] = []) {
        guard let fd = Bench.connect(port: port, noDelay: true) else { return nil }
        self.fd = fd
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        guard writeAll(Array(request.utf8)) else { return nil }
        let separator = Array("\r\n\r\n".utf8)
        for _ in 0..<1000 where buffer.firstRange(of: separator) == nil {
            guard fill(timeoutMs: 5000) else { return nil }
        }
        guard let end = buffer.firstRange(of: separator),
            String(decoding: buffer[..<end.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.1 101")
        else { return nil }
        buffer.removeFirst(end.upperBound)
    }

    deinit { close(fd) }

    /// Reads frames, answering pings, until `take` returns a value; nil on close or timeout.
    private func pump<T>(timeoutMs: Int32, _ take: (UInt8, [UInt8]) -> T?) -> T? {
        let deadline = Bench.now() + UInt64(timeoutMs) * 1_000_000
        while true {
            if let (opcode, payload) = frame() {
                switch opcode {
                case 0x9: _ = send(opcode: 0xA, payload: payload)
                case 0x8: return nil
                default: if let value = take(opcode, payload) { return value }
                }
                continue
            }
            let now = Bench.now()
            guard now < deadline, fill(timeoutMs: Int32((deadline - now) / 1_000_000) + 1) else { return nil }
        }
    }

    /// The next text message, or nil when none arrives within `timeoutMs` or the socket ends.
    func next(timeoutMs: Int32) -> String? {
        pump(timeoutMs: timeoutMs) { opcode, payload in opcode == 0x1 ? String(decoding: payload, as: UTF8.self) : nil }
    }

    func send(text: String) -> Bool { send(opcode: 0x1, payload: Array(text.utf8)) }

    /// Payload bytes of binary frames not yet taken by ``readBinary(_:timeoutMs:)``.
    private var binary: [UInt8] = []
    private var binaryOffset = 0

    /// Exactly `count` bytes of the binary stream (frames joined), or nil on timeout or close.
    func readBinary(_ count: Int, timeoutMs: Int32 = 10_000) -> [UInt8]? {
        if binary.count - binaryOffset < count {
            let filled: Bool? = pump(timeoutMs: timeoutMs) { opcode, payload in
                if opcode == 0x2 || opcode == 0x0 { binary += payload }
                return binary.count - binaryOffset >= count ? true : nil
            }
            guard filled != nil else { return nil }
        }
        let out = Array(binary[binaryOffset..<(binaryOffset + count)])
        binaryOffset += count
        if binaryOffset > 1 << 20 {
            binary.removeFirst(binaryOffset)
            binaryOffset = 0
        }
        return out
    }

    /// Sends one masked frame.
    func send(opcode: UInt8, payload: [UInt8]) -> Bool {
        var frame: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame += mask
        for (index, byte) in payload.enumerated() { frame.append(byte ^ mask[index % 4]) }
        return writeAll(frame)
    }

    /// One complete (unmasked, unfragmented) server frame from the buffer, if there is one.
    private func frame() -> (UInt8, [UInt8])? {
        guard buffer.count >= 2 else { return nil }
        let opcode = buffer[0] & 0x0F
        var length = Int(buffer[1] & 0x7F)
        var offset = 2
        if length == 126 {
            guard buffer.count >= 4 else { return nil }
            length = Int(buffer[2]) << 8 | Int(buffer[3])
            offset = 4
        } else if length == 127 {
            guard buffer.count >= 10 else { return nil }
            length = buffer[2..<10].reduce(0) { $0 << 8 | Int($1) }
            offset = 10
        }
        guard buffer.count >= offset + length else { return nil }
        let payload = Array(buffer[offset..<(offset + length)])
        buffer.removeFirst(offset + length)
        return (opcode, payload)
    }

    private func fill(timeoutMs: Int32) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, timeoutMs) > 0 else { return false }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        buffer += chunk[0..<n]
        return true
    }

    private func writeAll(_ bytes: [UInt8]) -> Bool { Bench.sendAll(fd, bytes) }

}
