import AgentProc
import Testing

/// The reference's head/tail output rules, and no invented seam.
struct HeadTailTests {
    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func emptyBufferHasNoOutputAndNoMetadata() {
        let buffer = HeadTail()
        let (bytes, meta) = buffer.output()
        #expect(bytes.isEmpty)
        #expect(meta == nil)
    }

    @Test func smallWritesComeBackVerbatim() {
        var buffer = HeadTail()
        buffer.write(Array("hello ".utf8))
        buffer.write(Array("world\n".utf8))
        let (bytes, meta) = buffer.output()
        #expect(text(bytes) == "hello world\n")
        #expect(meta == nil)
    }

    @Test func byteAtATimeWrites() {
        var buffer = HeadTail()
        for byte in Array("abc\ndef".utf8) { buffer.write([byte]) }
        #expect(text(buffer.output().bytes) == "abc\ndef")
        #expect(buffer.output().truncation == nil)
    }

    @Test func exactlyHeadSizeOfShortLinesIsVerbatim() {
        var buffer = HeadTail()
        let line = Array("0123456789abcde\n".utf8)  // 16 bytes
        var all: [UInt8] = []
        for _ in 0..<(16384 / 16) { all += line }
        buffer.write(all)
        let (bytes, meta) = buffer.output()
        #expect(bytes == all)
        #expect(meta == nil)
    }

    @Test func tenByTenWithTwentyBytesHasMetadataAndNothingOmitted() {
        var buffer = HeadTail(headCapacity: 10, tailCapacity: 10)
        buffer.write(Array("0123456789abcdefghij".utf8))
        let (bytes, meta) = buffer.output()
        let m = try! #require(meta)
        #expect(m.omittedBytes == 0)
        #expect(m.originalBytes == 20)
        #expect(m.strategy == "head_tail")
        // Improvement 1: the reference would return "0123456789\nabcdefghij".
        #expect(text(bytes) == "0123456789abcdefghij")
        #expect(m.retainedBytes == bytes.count)
    }

    @Test func hundredBytesOmitsEighty() {
        var buffer = HeadTail(headCapacity: 10, tailCapacity: 10)
        buffer.write(Array(repeating: UInt8(ascii: "A"), count: 50) + Array(repeating: UInt8(ascii: "Z"), count: 50))
        let (bytes, meta) = buffer.output()
        let m = try! #require(meta)
        #expect(m.omittedBytes == 80)
        #expect(m.originalBytes == 100)
        let s = text(bytes)
        #expect(s.hasPrefix("AAAAAAAAAA\n"))
        #expect(s.hasSuffix("\nZZZZZZZZZZ"))
        #expect(s.contains("... [omitted 80 bytes] ..."))
        #expect(buffer.retainedCount == 20)
        #expect(buffer.totalWritten == 100)
        #expect(m.retainedBytes == bytes.count)
    }

    @Test func fiftyBytesOmitsThirty() {
        var buffer = HeadTail(headCapacity: 10, tailCapacity: 10)
        buffer.write(Array(repeating: UInt8(ascii: "x"), count: 50))
        #expect(buffer.output().truncation?.omittedBytes == 30)
    }

    @Test func fiveMiBStaysBounded() {
        var buffer = HeadTail()
        let chunk = [UInt8](repeating: UInt8(ascii: "y"), count: 64 * 1024)
        for _ in 0..<80 { buffer.write(chunk) }
        #expect(buffer.retainedCount <= 32768)
        #expect(buffer.output().truncation?.originalBytes == 5 * 1024 * 1024)
    }

    @Test func longLineIsCutToExactlyMaxLength() {
        var buffer = HeadTail()
        buffer.write(Array(repeating: UInt8(ascii: "L"), count: 2548))
        let s = text(buffer.output().bytes)
        #expect(s.utf8.count == 2048)
        #expect(s.hasSuffix("... [truncated]"))
        #expect(!s.contains("\n"))
    }

    @Test func longLineInTailIsCut() {
        var buffer = HeadTail()
        buffer.write(Array(repeating: UInt8(ascii: "h"), count: 16384))
        buffer.write(Array(repeating: UInt8(ascii: "\n"), count: 1))
        buffer.write(Array(repeating: UInt8(ascii: "m"), count: 40000))
        buffer.write(Array("\n".utf8) + Array(repeating: UInt8(ascii: "t"), count: 3000))
        let s = text(buffer.output().bytes)
        let lines = s.split(separator: "\n", omittingEmptySubsequences: false)
        for line in lines { #expect(line.utf8.count <= 2048) }
        #expect(lines.last?.hasSuffix("... [truncated]") == true)
    }

    @Test func onlyTheLongMiddleLineChanges() {
        var buffer = HeadTail()
        let long = String(repeating: "m", count: 3000)
        buffer.write(Array("short one\n\(long)\nshort two".utf8))
        let lines = text(buffer.output().bytes).split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0] == "short one")
        #expect(lines[1] == String(repeating: "m", count: 2032) + " ... [truncated]")
        #expect(lines[2] == "short two")
    }

    @Test func ringWrapKeepsTheNewestBytes() {
        var buffer = HeadTail(headCapacity: 5, tailCapacity: 10)
        for part in ["HEADD", "0123456789", "abcdefghij", "ABCDE"] { buffer.write(Array(part.utf8)) }
        let s = text(buffer.output().bytes)
        #expect(s.hasPrefix("HEADD"))
        #expect(s.hasSuffix("fghijABCDE"))
    }

    @Test func emptyWriteResetAndCopy() {
        var buffer = HeadTail()
        buffer.write([UInt8]())
        #expect(buffer.output().bytes.isEmpty)
        buffer.write(Array("abc".utf8))
        var copy = (buffer.headBytes + buffer.tailBytes)
        copy[0] = UInt8(ascii: "z")
        #expect(text((buffer.headBytes + buffer.tailBytes)) == "abc")
        buffer.reset()
        #expect(buffer.retainedCount == 0)
        #expect(buffer.totalWritten == 0)
        #expect(buffer.output().bytes.isEmpty)
    }

    @Test func seamBetweenHeadAndTailIsNotInvented() {
        // 16385..32768 bytes: the reference inserts "\n" at the seam; we return the original.
        var buffer = HeadTail()
        var all: [UInt8] = []
        for i in 0..<20000 { all.append(UInt8(ascii: "a") + UInt8(i % 26)) }
        for i in stride(from: 100, to: all.count, by: 100) { all[i] = UInt8(ascii: "\n") }
        buffer.write(all)
        let (bytes, meta) = buffer.output()
        #expect(bytes == all)
        #expect(meta?.omittedBytes == 0)
    }

    @Test func largeSingleWriteBeyondTailKeepsNewest() {
        var store = HeadTail(headCapacity: 4, tailCapacity: 8)
        store.write(Array("HEAD".utf8) + Array("0123456789ABCDEFGHIJ".utf8))
        #expect(String(decoding: store.tailBytes, as: UTF8.self) == "CDEFGHIJ")
        #expect(store.omittedCount == 12)
    }

    @Test func aSkipKeepsTheTailAndItsMetadataUntilBytesAfterItArrive() {
        var buffer = HeadTail(headCapacity: 4, tailCapacity: 4)
        buffer.write(Array("HEADabcdefgh".utf8))
        buffer.skip(100)
        // Until bytes written after the skip come, the output is shown as it was before it.
        let before = buffer.output()
        #expect(text(before.bytes) == "HEAD\n\n... [omitted 4 bytes] ...\n\nefgh")
        #expect(before.truncation?.originalBytes == 12)
        #expect(before.truncation?.omittedBytes == 4)
        #expect(before.truncation?.retainedBytes == before.bytes.count)
        #expect(buffer.totalWritten == 112)
        // A subscriber's live bytes continue from the skipped ones, not from that tail.
        #expect(buffer.tailBytes.isEmpty)
        #expect(buffer.omittedCount == 108)
        buffer.write(Array("XY".utf8))
        let after = buffer.output()
        #expect(text(after.bytes) == "HEAD\n\n... [omitted 108 bytes] ...\n\nXY")
        #expect(after.truncation?.originalBytes == 114)
        #expect(after.truncation?.omittedBytes == 108)
        #expect(text(buffer.tailBytes) == "XY")
    }

    @Test func aSkipBeforeAnyTailByteStillReportsTheTruncation() {
        var buffer = HeadTail(headCapacity: 4, tailCapacity: 4)
        buffer.write(Array("HEAD".utf8))
        #expect(buffer.output().truncation == nil, "exactly the head: verbatim")
        buffer.skip(50)
        let (bytes, meta) = buffer.output()
        #expect(text(bytes) == "HEAD\n\n... [omitted 50 bytes] ...\n\n")
        #expect(meta?.originalBytes == 54)
        #expect(meta?.omittedBytes == 50)
        #expect(meta?.retainedBytes == bytes.count)
    }

    @Test func retainedBytesCountsBeforeJSONEncoding() {
        var buffer = HeadTail(headCapacity: 4, tailCapacity: 4)
        buffer.write([0xff, 0xfe, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48])
        let (bytes, meta) = buffer.output()
        #expect(meta?.retainedBytes == bytes.count)
        #expect(bytes.prefix(2) == [0xff, 0xfe])
    }
}
