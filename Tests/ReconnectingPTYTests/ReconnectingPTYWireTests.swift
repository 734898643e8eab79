@testable import ReconnectingPTY
import NIOCore
import NIOEmbedded
import Testing

/// The init frame, the input stream, the replay buffer, the lifetimes and the terminal's
/// variables, as plain values.
struct ReconnectingPTYWireTests {
    @Test func theInitFrameIsALittleEndianLengthAndGoFieldNames() {
        let body = Array(#"{"id":"abc","HEIGHT":30,"Width":100,"command":"top","Command":"htop","BackendType":"buffered","Extra":1}"#.utf8)
        let frame = [UInt8(body.count & 0xff), UInt8(body.count >> 8)] + body + Array(#"{"data":"x"}"#.utf8)
        #expect(PTYInit.read(frame.prefix(1)) == .incomplete)
        #expect(PTYInit.read(frame.prefix(body.count + 1)) == .incomplete)
        #expect(
            PTYInit.read(frame)
                == .frame(
                    PTYInit(id: "abc", height: 30, width: 100, command: "htop", backendType: "buffered"), consumed: body.count + 2))
        // The reference client's own bytes read back as themselves.
        let sent = PTYInit(id: "7d1c", height: 24, width: 80, command: "echo \"hi\"", container: "c", containerUser: "u", backendType: "")
        #expect(PTYInit.read(sent.frameBytes) == .frame(sent, consumed: sent.frameBytes.count))
    }

    @Test func anInvalidInitIsRefused() {
        func read(_ text: String) -> PTYInit.Reading {
            let body = Array(text.utf8)
            return PTYInit.read([UInt8(body.count & 0xff), UInt8(body.count >> 8)] + body)
        }
        #expect(read(#"{"ID":"a","Height":70000}"#) == .invalid("json: cannot unmarshal number 70000 into Go struct field Height of type uint16"))
        #expect(read(#"{"ID":"a","Width":-1}"#) == .invalid("json: cannot unmarshal number -1 into Go struct field Width of type uint16"))
        #expect(read(#"{"ID":5}"#) == .invalid("json: cannot unmarshal number into Go struct field ID of type string"))
        #expect(read(#"{"Height":1}"#) == .invalid("no ID"))
        #expect(read(#"{"ID":"a"} x"#) == .invalid("invalid character 'x' after top-level value"))
        #expect(read("{\"ID\":\"" + String(repeating: "a", count: 300) + "\"}") == .invalid("ID longer than 256 bytes"))
    }

    @Test func inputObjectsDecodeTheSameHoweverTheStreamIsSplit() {
        let stream = Array(#"{"data":"ls\r"} {"height":40,"width":120}{"data":"a}\"{","height":0,"width":9}"#.utf8) + [0x0a] + Array(#"{"DATA":"é"}"#.utf8)
        let expected = [PTYInput(data: "ls\r"), PTYInput(height: 40, width: 120), PTYInput(data: "a}\"{", width: 9), PTYInput(data: "é")]
        var whole = PTYInputDecoder()
        let all = whole.feed(stream)
        #expect(all.inputs == expected && all.error == nil)
        var bytewise = PTYInputDecoder()
        var inputs: [PTYInput] = []
        for byte in stream {
            let result = bytewise.feed([byte])
            #expect(result.error == nil)
            inputs += result.inputs
        }
        #expect(inputs == expected)
        #expect(expected[1].size! == (40, 120) && expected[2].size == nil)
    }

    /// An object of nearly 1 MiB sent 100 bytes at a time: each byte is examined once for the
    /// object's end (it was rescanned from the object's start on every read: about 5·10⁹
    /// byte visits on the tailnet's one loop for this object).
    @Test func aLongObjectInSmallPiecesIsScannedOnce() {
        let object = Array(#"{"data":""#.utf8) + [UInt8](repeating: 0x61, count: PTYInputDecoder.maxObjectBytes - 100) + Array(#""}"#.utf8)
        var decoder = PTYInputDecoder()
        var inputs: [PTYInput] = []
        var offset = 0
        while offset < object.count {
            let result = decoder.feed(object[offset..<min(offset + 100, object.count)])
            #expect(result.error == nil)
            inputs += result.inputs
            offset += 100
        }
        #expect(inputs.count == 1 && inputs.first?.data.utf8.count == PTYInputDecoder.maxObjectBytes - 100)
        #expect(decoder.bytesScanned == object.count)
    }

    @Test func aBadInputObjectEndsTheStreamAfterTheGoodOnes() {
        var decoder = PTYInputDecoder()
        let result = decoder.feed(Array(#"{"data":"a"}[1]{"data":"b"}"#.utf8))
        #expect(result.inputs == [PTYInput(data: "a")])
        #expect(result.error?.description == "json: cannot unmarshal array into Go value of type workspacesdk.ReconnectingPTYRequest")
        var long = PTYInputDecoder()
        let unfinished = long.feed(Array(#"{"data":""#.utf8) + [UInt8](repeating: 0x61, count: PTYInputDecoder.maxObjectBytes))
        #expect(unfinished.inputs.isEmpty && unfinished.error?.description == "an input object longer than 1048576 bytes")
    }

    @Test func theReplayKeepsTheNewestBytes() {
        var replay = ReplayBuffer(capacity: 8)
        replay.append(Array("abc".utf8))
        #expect(replay.contents == Array("abc".utf8))
        replay.append(Array("defgh".utf8))
        #expect(replay.contents == Array("abcdefgh".utf8))
        replay.append(Array("ij".utf8))
        #expect(replay.contents == Array("cdefghij".utf8))
        replay.append(Array("0123456789".utf8))
        #expect(replay.contents == Array("23456789".utf8))
        replay.append(Array("x".utf8))
        #expect(replay.contents == Array("3456789x".utf8))
    }

    @Test func aSessionNobodyAttachesToEndsAfterTheAttachTimeout() {
        var lifetime = PTYLifetime(attachTimeout: .seconds(30), idleTimeout: .seconds(300))
        #expect(lifetime.start == .arm(.seconds(30), generation: 0))
        #expect(lifetime.timerFired(generation: 0) == .expire)
        #expect(lifetime.attach() == .none && lifetime.timerFired(generation: 0) == .none)
    }

    @Test func aSessionLivesWhileAttachedAndTheIdleTimeoutAfterTheLastDetach() {
        var lifetime = PTYLifetime(attachTimeout: .seconds(30), idleTimeout: .seconds(300))
        #expect(lifetime.attach() == .none)
        #expect(lifetime.attach() == .none)
        // The first timer is stale once a connection attached.
        #expect(lifetime.timerFired(generation: 0) == .none)
        #expect(lifetime.detach() == .none)
        #expect(lifetime.detach() == .arm(.seconds(300), generation: 3))
        // Reattached before the idle timer: its firing does nothing; the next detach arms anew.
        #expect(lifetime.attach() == .none)
        #expect(lifetime.timerFired(generation: 3) == .none)
        #expect(lifetime.detach() == .arm(.seconds(300), generation: 5))
        #expect(lifetime.timerFired(generation: 3) == .none)
        #expect(lifetime.timerFired(generation: 5) == .expire)
        // Expired is final.
        #expect(lifetime.attach() == .none && lifetime.detach() == .none && lifetime.timerFired(generation: 5) == .none)
    }

    @Test func theTerminalsVariables() {
        func variables(_ given: [String: String]) -> [String: String] {
            var variables = given
            ReconnectingPTYServer.addTerminalVariables(&variables)
            return variables
        }
        #expect(variables([:]) == ["TERM": "xterm-256color", "LC_CTYPE": "C.UTF-8"])
        #expect(variables(["TERM": "dumb", "LANG": "en_US.UTF-8"]) == ["TERM": "xterm-256color", "LANG": "en_US.UTF-8"])
        #expect(variables(["LANG": "C"]) == ["TERM": "xterm-256color", "LANG": "C", "LC_CTYPE": "C.UTF-8"])
        #expect(variables(["LC_CTYPE": "POSIX", "LANG": "en_US.utf8"]) == ["TERM": "xterm-256color", "LANG": "en_US.utf8", "LC_CTYPE": "C.UTF-8"])
        #expect(variables(["LC_ALL": "C"]) == ["TERM": "xterm-256color", "LC_ALL": "C"])
    }
}

/// A connection whose last output is never delivered (its client stopped reading) is closed
/// at the bound, on the loop's clock; one that takes it is closed at once.
struct PTYAttachmentCloseTests {
    @Test func aConnectionThatDoesNotReadItsLastOutputIsClosedAtTheBound() throws {
        let loop = EmbeddedEventLoop()
        let stalled = EmbeddedChannel(loop: loop)
        try stalled.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let never = loop.makePromise(of: Void.self)
        PTYSession.close(stalled, after: never.futureResult, within: .seconds(2))
        loop.advanceTime(by: .milliseconds(1999))
        #expect(stalled.isActive)
        loop.advanceTime(by: .milliseconds(1))
        #expect(!stalled.isActive)
        never.succeed()

        let reading = EmbeddedChannel(loop: loop)
        try reading.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let written = loop.makePromise(of: Void.self)
        PTYSession.close(reading, after: written.futureResult, within: .seconds(2))
        written.succeed()
        loop.run()
        #expect(!reading.isActive)
    }
}
