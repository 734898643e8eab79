import AgentTestSupport
import DRPC
import Testing

/// The dRPC wire, byte for byte.
struct DRPCWireTests {
    static let lifecycleRequest: [UInt8] = [0x0A, 0x0A, 0x08, 0x05, 0x12, 0x06, 0x08, 0x80, 0xE2, 0xCF, 0xAA, 0x06]
    static let method = "/coder.agent.v2.Agent/UpdateLifecycle"

    /// The worked example, byte for byte.
    @Test func goldenUnaryCallBytes() {
        var out: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 1, kind: .invoke, data: Array(Self.method.utf8)).encode(into: &out)
        DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: Self.lifecycleRequest).encode(into: &out)
        DRPCPacket(streamID: 1, messageID: 3, kind: .closeSend).encode(into: &out)
        let expected: [UInt8] =
            [0x03, 0x01, 0x01, 0x25] + Array(Self.method.utf8)
            + [0x05, 0x01, 0x02, 0x0C] + Self.lifecycleRequest
            + [0x0D, 0x01, 0x03, 0x00]
        #expect(out == expected)
        #expect(out.count == 61)

        var reply: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 1, kind: .message, data: Array(Self.lifecycleRequest.dropFirst(2))).encode(into: &reply)
        DRPCPacket(streamID: 1, messageID: 2, kind: .closeSend).encode(into: &reply)
        #expect(reply == [0x05, 0x01, 0x01, 0x0A, 0x08, 0x05, 0x12, 0x06, 0x08, 0x80, 0xE2, 0xCF, 0xAA, 0x06, 0x0D, 0x01, 0x02, 0x00])
    }

    @Test func unknownRouteErrorBytes() {
        let body = DRPCErrorBody.unknownRPC("/coder.agent.v2.Agent/Nope").encoded
        #expect(body.count == 65)
        let bytes = DRPCPacket(streamID: 1, messageID: 1, kind: .error, data: body).encoded()
        #expect(Array(bytes.prefix(12)) == [0x07, 0x01, 0x01, 0x41, 0, 0, 0, 0, 0, 0, 0, 0])
        #expect(String(decoding: bytes.dropFirst(12), as: UTF8.self) == #"protocol error: unknown rpc: "/coder.agent.v2.Agent/Nope""#)
    }

    /// The name is quoted as Go's `%q` does (DRPC's own quoting, without AgentCore).
    @Test func unknownRouteNameIsQuotedAsGoDoes() {
        let name = "/a\"b\\c\n\r\t\u{01}\u{7F}é"
        #expect(DRPCErrorBody.unknownRPC(name).message == #"protocol error: unknown rpc: "/a\"b\\c\n\r\t\x01\x7fé""#)
    }

    @Test func controlBytes() {
        #expect(DRPCFrame(streamID: 1, messageID: 1, kind: .cancel, control: true).controlByte == 0x89)
        let bytes: [(DRPCKind, UInt8)] = [(.invoke, 0x03), (.message, 0x05), (.error, 0x07), (.close, 0x0B), (.closeSend, 0x0D), (.invokeMetadata, 0x0F)]
        for (kind, byte) in bytes { #expect(DRPCFrame(streamID: 1, messageID: 1, kind: kind).controlByte == byte) }
        #expect(DRPCPacket(streamID: 1, messageID: 4, kind: .cancel).encoded() == [0x89, 0x01, 0x04, 0x00])
    }

    @Test func varints() {
        #expect(Varint.encoded(300) == [0xAC, 0x02])
        #expect(Varint.encoded(65536) == [0x80, 0x80, 0x04])
        #expect(Varint.encoded(UInt64.max).count == 10)
        for value: UInt64 in [0, 1, 127, 128, 300, 16383, 16384, 1 << 32, UInt64.max] {
            #expect(Varint.decode(Varint.encoded(value), at: 0) == .value(value, length: Varint.encoded(value).count))
        }
        #expect(Varint.decode([0x80, 0x80], at: 0) == .needMoreBytes)
        #expect(Varint.decode([UInt8](repeating: 0x80, count: 10) + [0x01], at: 0) == .tooLong)
        #expect(Varint.decode([UInt8](repeating: 0xFF, count: 9) + [0x02], at: 0) == .tooLong)
    }

    @Test func elevenByteVarintIsRefused() {
        var decoder = DRPCFrameDecoder()
        decoder.feed([0x05] + [UInt8](repeating: 0x80, count: 10) + [0x01, 0x01, 0x00])
        #expect(throws: DRPCWireError.varintTooLong) { try decoder.next() }
    }

    /// Every split of the worked example, down to one byte at a time, decodes identically.
    @Test func splitReadsDownToOneByte() throws {
        var all: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 1, kind: .invoke, data: Array(Self.method.utf8)).encode(into: &all)
        DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: [UInt8](repeating: 7, count: 300)).encode(into: &all)
        DRPCPacket(streamID: 1, messageID: 3, kind: .closeSend).encode(into: &all)
        for chunk in [1, 2, 3, 5, 7, 64, all.count] {
            var reader = DRPCPacketReader()
            var packets: [DRPCPacket] = []
            var index = 0
            while index < all.count {
                reader.feed(all[index..<min(all.count, index + chunk)])
                index += chunk
                while let packet = try reader.next() { packets.append(packet) }
            }
            #expect(packets.map(\.kind) == [.invoke, .message, .closeSend], "chunk \(chunk)")
            #expect(packets[1].data.count == 300)
        }
    }

    @Test func largeMessagesAreSplitAndReassembled() throws {
        let payload = (0..<(200 * 1024)).map { UInt8(truncatingIfNeeded: $0) }
        let bytes = DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: payload).encoded()
        var decoder = DRPCFrameDecoder()
        decoder.feed(bytes)
        var frames: [DRPCFrame] = []
        while let frame = try decoder.next() { frames.append(frame) }
        #expect(frames.count == 4)
        #expect(frames.dropLast().allSatisfy { $0.data.count == 65536 && !$0.done })
        #expect(frames.last?.done == true)
        var reader = DRPCPacketReader()
        reader.feed(bytes)
        #expect(try reader.next()?.data == payload)
    }

    @Test func exactlyFourMiBIsAcceptedAndOneMoreIsNot() throws {
        let limit = DRPCPacketAssembler.defaultMaxPacketSize
        var reader = DRPCPacketReader()
        reader.feed(DRPCPacket(streamID: 1, messageID: 1, kind: .message, data: [UInt8](repeating: 1, count: limit)).encoded())
        #expect(try reader.next()?.data.count == limit)
        var over = DRPCPacketReader()
        over.feed(DRPCPacket(streamID: 1, messageID: 1, kind: .message, data: [UInt8](repeating: 1, count: limit + 1)).encoded())
        #expect(throws: DRPCWireError.dataOverflow(limit: limit)) { try over.next() }
        // A single frame announcing more than the limit is refused before buffering it.
        var decoder = DRPCFrameDecoder()
        decoder.feed([0x05, 0x01, 0x01] + Varint.encoded(UInt64(limit + 1)))
        #expect(throws: DRPCWireError.dataOverflow(limit: limit)) { try decoder.next() }
    }

    @Test func emptyMessage() throws {
        var reader = DRPCPacketReader()
        reader.feed([0x05, 0x01, 0x01, 0x00])
        #expect(try reader.next() == DRPCPacket(streamID: 1, messageID: 1, kind: .message, data: []))
    }

    @Test func idRulesAreEnforced() throws {
        var a = DRPCPacketAssembler()
        _ = try a.append(DRPCFrame(streamID: 1, messageID: 2, kind: .message))
        #expect(throws: DRPCWireError.idMonotonicityViolation) { try a.append(DRPCFrame(streamID: 1, messageID: 1, kind: .message)) }
        var reuse = DRPCPacketAssembler()
        _ = try reuse.append(DRPCFrame(streamID: 1, messageID: 1, kind: .message))
        #expect(throws: DRPCWireError.idMonotonicityViolation) { try reuse.append(DRPCFrame(streamID: 1, messageID: 1, kind: .message)) }
        var zero = DRPCPacketAssembler()
        #expect(throws: DRPCWireError.idMonotonicityViolation) { try zero.append(DRPCFrame(streamID: 0, messageID: 1, kind: .message)) }
        var change = DRPCPacketAssembler()
        _ = try change.append(DRPCFrame(streamID: 1, messageID: 1, kind: .message, done: false, data: [1]))
        #expect(throws: DRPCWireError.kindChanged) { try change.append(DRPCFrame(streamID: 1, messageID: 1, kind: .error, data: [2])) }
    }

    @Test func newerIDDiscardsAHalfBuiltPacket() throws {
        var a = DRPCPacketAssembler()
        #expect(try a.append(DRPCFrame(streamID: 1, messageID: 1, kind: .message, done: false, data: [1, 2])) == nil)
        let packet = try a.append(DRPCFrame(streamID: 1, messageID: 2, kind: .message, data: [3]))
        #expect(packet == DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: [3]))
    }

    @Test func unknownKinds() throws {
        var a = DRPCPacketAssembler()
        #expect(try a.append(DRPCFrame(streamID: 1, messageID: 1, rawKind: 9, done: true, control: true, data: [1])) == nil)
        #expect(throws: DRPCWireError.unknownKind(9)) {
            try a.append(DRPCFrame(streamID: 1, messageID: 1, rawKind: 9, done: true, control: false, data: []))
        }
        // An ignored control frame does not consume an ID.
        #expect(try a.append(DRPCFrame(streamID: 1, messageID: 1, kind: .invoke, data: [0x41]))?.kind == .invoke)
    }

    @Test func errorBodies() {
        let body = DRPCErrorBody(code: 12, message: "Unimplemented")
        #expect(Array(body.encoded.prefix(8)) == [0, 0, 0, 0, 0, 0, 0, 12])
        #expect(DRPCErrorBody(decoding: body.encoded) == body)
        #expect(body.isUnsupported)
        #expect(DRPCErrorBody.unknownRPC("/x").isUnsupported)
        #expect(!DRPCErrorBody(code: 0, message: "boom").isUnsupported)
        let short = DRPCErrorBody(decoding: Array("oops".utf8))
        #expect(short.message == "oops (drpcwire note: invalid error data)")
        #expect(short.code == 0)
    }

    /// Random and mutated input: decoders answer or throw, never trap, and stay bounded.
    @Test func fuzzedBytesNeverTrap() {
        var rng = SplitMix64(seed: 0xD7C)
        var valid: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 1, kind: .invoke, data: Array(Self.method.utf8)).encode(into: &valid)
        DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: Self.lifecycleRequest).encode(into: &valid)
        DRPCPacket(streamID: 1, messageID: 3, kind: .closeSend).encode(into: &valid)
        for round in 0..<5_000 {
            var bytes = valid
            if round % 2 == 0 {
                for _ in 0..<(1 + Int(rng.next() % 4)) {
                    let at = Int(rng.next() % UInt64(bytes.count))
                    bytes[at] = UInt8(truncatingIfNeeded: rng.next())
                }
            } else {
                bytes = (0..<Int(rng.next() % 80)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            var reader = DRPCPacketReader(maxPacketSize: 1 << 16)
            reader.feed(bytes)
            for _ in 0..<64 {
                guard let packet = try? reader.next() else { break }
                #expect(packet.data.count <= 1 << 16)
            }
        }
    }
}
