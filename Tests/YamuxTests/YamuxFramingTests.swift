import Testing
import Yamux

/// Yamux framing, including a worked example's bytes.
struct YamuxFramingTests {
    @Test func goldenHeaders() {
        #expect(
            YamuxHeader(type: .windowUpdate, flags: .syn, streamID: 1, length: 0).encoded
                == [0x00, 0x01, 0x00, 0x01, 0, 0, 0, 1, 0, 0, 0, 0])
        #expect(
            YamuxHeader(type: .data, streamID: 1, length: 61).encoded
                == [0x00, 0x00, 0x00, 0x00, 0, 0, 0, 1, 0, 0, 0, 0x3D])
        #expect(
            YamuxHeader(type: .windowUpdate, flags: .ack, streamID: 1, length: 0).encoded
                == [0x00, 0x01, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 0])
        #expect(
            YamuxHeader(type: .windowUpdate, flags: .fin, streamID: 1, length: 0).encoded
                == [0x00, 0x01, 0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 0])
        #expect(
            YamuxHeader(type: .ping, flags: .syn, streamID: 0, length: 0xDEADBEEF).encoded
                == [0x00, 0x02, 0x00, 0x01, 0, 0, 0, 0, 0xDE, 0xAD, 0xBE, 0xEF])
        #expect(
            YamuxHeader(type: .goAway, streamID: 0, length: YamuxGoAwayCode.protocolError.rawValue).encoded
                == [0x00, 0x03, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 1])
    }

    @Test func roundTripEveryTypeAndFlag() throws {
        for type in YamuxType.allCases {
            for flags: YamuxFlags in [[], .syn, .ack, .fin, .rst, [.syn, .fin], [.ack, .rst]] {
                let header = YamuxHeader(type: type, flags: flags, streamID: 0x0102_0304, length: type == .data ? 5 : 0xFFFF_FFFF)
                #expect(try YamuxHeader(decoding: header.encoded) == header)
            }
        }
    }

    @Test func badVersionAndTypeAreSessionErrors() {
        #expect(throws: YamuxError.unsupportedVersion(1)) { try YamuxHeader(decoding: [1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]) }
        #expect(throws: YamuxError.invalidType(4)) { try YamuxHeader(decoding: [0, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]) }
    }

    @Test func splitReadsDownToOneByte() throws {
        var stream: [UInt8] = []
        stream += YamuxFrame(header: YamuxHeader(type: .windowUpdate, flags: .syn, streamID: 1, length: 0)).encoded
        stream += YamuxFrame(header: YamuxHeader(type: .data, streamID: 1, length: 300), payload: [UInt8](repeating: 9, count: 300)).encoded
        stream += YamuxFrame(header: YamuxHeader(type: .ping, flags: .syn, streamID: 0, length: 7)).encoded
        for chunk in [1, 2, 5, 11, 12, 13, 100, stream.count] {
            var decoder = YamuxFrameDecoder()
            var frames: [YamuxFrame] = []
            var index = 0
            while index < stream.count {
                decoder.feed(stream[index..<min(stream.count, index + chunk)])
                index += chunk
                while let frame = try decoder.next() { frames.append(frame) }
            }
            #expect(frames.map(\.header.type) == [.windowUpdate, .data, .ping], "chunk \(chunk)")
            #expect(frames[1].payload.count == 300)
            #expect(frames[2].header.length == 7)
        }
    }

    @Test func dataBeyondTheWindowIsRefusedBeforeBuffering() throws {
        var decoder = YamuxFrameDecoder()
        decoder.feed(YamuxHeader(type: .data, streamID: 1, length: YamuxHeader.initialWindow + 1).encoded)
        #expect(throws: YamuxError.payloadTooLarge(YamuxHeader.initialWindow + 1)) { try decoder.next() }
        var ok = YamuxFrameDecoder()
        ok.feed(
            YamuxFrame(
                header: YamuxHeader(type: .data, streamID: 1, length: YamuxHeader.initialWindow),
                payload: [UInt8](repeating: 0, count: Int(YamuxHeader.initialWindow))
            ).encoded)
        #expect(try ok.next()?.payload.count == Int(YamuxHeader.initialWindow))
    }

    @Test func fuzzedBytesNeverTrap() {
        var state: UInt64 = 0x7A3
        func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 33
        }
        for _ in 0..<5_000 {
            var decoder = YamuxFrameDecoder(maxPayload: 4096)
            let bytes = (0..<Int(next() % 64)).map { _ in UInt8(truncatingIfNeeded: next() % 5 == 0 ? next() : 0) }
            decoder.feed(bytes)
            for _ in 0..<16 {
                guard let frame = try? decoder.next() else { break }
                #expect(frame.payload.count <= 4096)
            }
        }
    }
}
