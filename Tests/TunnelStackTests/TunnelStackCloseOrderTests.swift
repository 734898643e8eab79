import AgentTestSupport
import Foundation
import Glibc
import NIOCore
import Synchronization
import Testing
import TunnelStack

/// Data and FIN keep their order through a forward, both ways, whatever the timing: a
/// service that answers and closes at once, one that half-closes and reads on, one that
/// closes while the tunnel peer has not read, and a peer that sends and closes at once.
/// The peer is the kernel of a private network namespace (see ``NamespaceTunnel``); each
/// case runs many connections in a row to catch timing-dependent loss.
@Suite(.serialized)
struct TunnelStackCloseOrderTests {
    /// Connections per case: enough for a race between the local close and the relay's
    /// start to show up, bounded in time by the clients' socket timeouts.
    static let rounds = 50

    @Test func aServiceThatAnswersAndClosesAtOnceDeliversEverythingThenFIN() async throws {
        let rounds = Self.rounds
        // Even rounds send 64 KiB + 7 bytes, odd ones 5; rounds 2 and 3 of every 4 answer a
        // 4-byte request, the others write as soon as they accept.
        let server = try #require(
            LocalServer(connections: rounds) { connection, index in
                if index % 4 >= 2 { _ = readAll(connection, limit: 4) }
                _ = writeAll(connection, pattern(index % 2 == 0 ? 65536 + 7 : 5, step: 7, offset: index))
            })
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x20))
        let script =
            Self.prelude + """
                for i in range(\(rounds)):
                    size = 65536 + 7 if i % 2 == 0 else 5
                    s = socket.create_connection(('\(tunnel.addresses[0])', \(server.port)), timeout=60)
                    try:
                        if i % 4 >= 2:
                            s.sendall(b'GET\\n')
                        data = read_to_end(s)
                    except Exception as error:
                        print('round', i, 'failed:', type(error).__name__, error)
                        break
                    finally:
                        s.close()
                    if data != pattern(size, 7, i):
                        print('round', i, 'got', len(data), 'bytes of', size)
                        break
                else:
                    print('all', \(rounds))
                """
        let outcome = await tunnel.python(script)
        #expect(outcome.stdout.contains("all \(rounds)"), tunnel.report(outcome))
        await server.finished.wait(upTo: .seconds(60))
        #expect(server.finished.isSet)
        let drained = await eventually(timeout: .seconds(30)) { tunnel.stack.counters().openConnections == 0 }
        #expect(drained, "\(tunnel.stack.counters())")
        server.stop()
        await tunnel.close()
    }

    @Test func aServiceThatHalfClosesStillReceivesEverythingThePeerSends() async throws {
        let rounds = Self.rounds
        let results = Mutex<[Int: Bool]>([:])
        let server = try #require(
            LocalServer(connections: rounds) { connection, index in
                _ = writeAll(connection, Array("hello".utf8))
                shutdown(connection, Int32(SHUT_WR))
                let expected = pattern(Self.halfCloseSize(index), step: 11, offset: index)
                let bytes = readAll(connection, limit: expected.count + 1)
                results.withLock { $0[index] = bytes == expected }
            })
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x21))
        let script =
            Self.prelude + """
                for i in range(\(rounds)):
                    size = \(Self.halfCloseSizePython)
                    s = socket.create_connection(('\(tunnel.addresses[0])', \(server.port)), timeout=60)
                    try:
                        greeting = read_to_end(s)
                        s.sendall(pattern(size, 11, i))
                        s.shutdown(socket.SHUT_WR)
                    except Exception as error:
                        print('round', i, 'failed:', type(error).__name__, error)
                        break
                    finally:
                        s.close()
                    if greeting != b'hello':
                        print('round', i, 'greeting', greeting)
                        break
                else:
                    print('all', \(rounds))
                """
        let outcome = await tunnel.python(script)
        #expect(outcome.stdout.contains("all \(rounds)"), tunnel.report(outcome))
        await server.finished.wait(upTo: .seconds(60))
        let seen = results.withLock { $0 }
        #expect(seen.count == rounds && seen.values.allSatisfy { $0 }, "\(seen.filter { !$0.value }.keys.sorted()) of \(seen.count)")
        server.stop()
        await tunnel.close()
    }

    @Test func aServiceThatClosesBeforeThePeerReadsDeliversEverythingThenFIN() async throws {
        let rounds = 20
        let markers = FileManager.default.temporaryDirectory.appendingPathComponent("tunnel-close-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: markers, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: markers) }
        // More than lwIP's send buffer and window (64 KiB each): most of it waits in the
        // stack and the local socket when the service closes.
        let server = try #require(
            LocalServer(
                connections: rounds,
                closed: { index in try? TestFile.write("\(markers)/closed-\(index)", [UInt8]()) }
            ) { connection, index in
                // Room for everything in the service's own send buffer: its write and close
                // finish while the peer reads nothing (root may exceed wmem_max).
                var size: Int32 = 4 << 20
                let soSendBufferForce: Int32 = 32
                setsockopt(connection, SOL_SOCKET, soSendBufferForce, &size, socklen_t(MemoryLayout<Int32>.size))
                _ = writeAll(connection, pattern(200_000 + index, step: 13, offset: index))
            })
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x22))
        let script =
            Self.prelude + """
                import os
                for i in range(\(rounds)):
                    size = 200000 + i
                    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    s.settimeout(30)
                    s.connect(('\(tunnel.addresses[0])', \(server.port)))
                    marker = '\(markers)/closed-%d' % i
                    deadline = time.monotonic() + 30
                    while not os.path.exists(marker) and time.monotonic() < deadline:
                        time.sleep(0.005)
                    try:
                        if not os.path.exists(marker):
                            print('round', i, 'the service did not close')
                            break
                        data = read_to_end(s, chunk=1024, slow=True)
                    except Exception as error:
                        print('round', i, 'failed:', type(error).__name__, error)
                        break
                    finally:
                        s.close()
                    if data != pattern(size, 13, i):
                        print('round', i, 'got', len(data), 'bytes of', size)
                        break
                else:
                    print('all', \(rounds))
                """
        let outcome = await tunnel.python(script)
        #expect(outcome.stdout.contains("all \(rounds)"), tunnel.report(outcome))
        await server.finished.wait(upTo: .seconds(60))
        let drained = await eventually(timeout: .seconds(30)) { tunnel.stack.counters().openConnections == 0 }
        #expect(drained, "\(tunnel.stack.counters())")
        server.stop()
        await tunnel.close()
    }

    @Test func aPeerThatSendsAndClosesAtOnceDeliversEverythingThenEOF() async throws {
        let rounds = Self.rounds
        let server = try #require(
            LocalServer(connections: rounds) { connection, index in
                let size = Self.reverseSize(index)
                let bytes = readAll(connection, limit: size + 1)
                let reply = bytes == pattern(size, step: 17, offset: index) ? "ok \(size)" : "bad \(bytes.count)"
                _ = writeAll(connection, Array(reply.utf8))
            })
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x23))
        let script =
            Self.prelude + """
                for i in range(\(rounds)):
                    size = \(Self.reverseSizePython)
                    s = socket.create_connection(('\(tunnel.addresses[0])', \(server.port)), timeout=60)
                    try:
                        s.sendall(pattern(size, 17, i))
                        s.shutdown(socket.SHUT_WR)
                        reply = read_to_end(s)
                    except Exception as error:
                        print('round', i, 'failed:', type(error).__name__, error)
                        break
                    finally:
                        s.close()
                    if reply != b'ok %d' % size:
                        print('round', i, 'reply', reply)
                        break
                else:
                    print('all', \(rounds))
                """
        let outcome = await tunnel.python(script)
        #expect(outcome.stdout.contains("all \(rounds)"), tunnel.report(outcome))
        await server.finished.wait(upTo: .seconds(60))
        let drained = await eventually(timeout: .seconds(30)) { tunnel.stack.counters().openConnections == 0 }
        #expect(drained, "\(tunnel.stack.counters())")
        server.stop()
        await tunnel.close()
    }

    @Test func aHalfClosedConnectionThatGoesQuietIsClosedAfterItsBound() async throws {
        var configuration = TunnelStackConfiguration()
        configuration.halfClosedTimeout = .seconds(1)
        let endedLocally = TestFlag()
        let server = try #require(
            LocalServer { connection in
                _ = writeAll(connection, Array("bye".utf8))
                shutdown(connection, Int32(SHUT_WR))
                // The peer never sends nor closes: the read ends when the stack gives up.
                if readAll(connection, limit: 1).isEmpty { endedLocally.set() }
            })
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x24), configuration: configuration)
        let script =
            Self.prelude + """
                import sys
                s = socket.create_connection(('\(tunnel.addresses[0])', \(server.port)), timeout=20)
                print('read', read_to_end(s), flush=True)
                sys.stdin.read()
                """
        let client = try #require(tunnel.startPython(script))
        let closed = await eventually(timeout: .seconds(30)) { tunnel.stack.counters().halfClosedTimeouts == 1 }
        #expect(closed, "\(tunnel.stack.counters())")
        await server.finished.wait(upTo: .seconds(30))
        #expect(endedLocally.isSet)
        let drained = await eventually(timeout: .seconds(30)) { tunnel.stack.counters().openConnections == 0 }
        #expect(drained)
        #expect(tunnel.stack.counters().idleTimeouts == 0)
        client.kill()
        server.stop()
        await tunnel.close()
    }

    // MARK: sizes and scripts

    static func halfCloseSize(_ index: Int) -> Int { index % 2 == 0 ? 100_000 + index : 3 }
    static let halfCloseSizePython = "100000 + i if i % 2 == 0 else 3"

    static func reverseSize(_ index: Int) -> Int { [3, 65536 + 11, 300_000][index % 3] }
    static let reverseSizePython = "[3, 65536 + 11, 300000][i % 3]"

    /// The clients' helpers: ``pattern(_:step:offset:)`` in Python, and reading to EOF.
    static let prelude = """
        import socket, time
        def pattern(count, step, offset):
            return (bytes(((j * step + offset) & 255) for j in range(256)) * (count // 256 + 1))[:count]
        def read_to_end(s, chunk=65536, slow=False):
            chunks = []
            while True:
                data = s.recv(chunk)
                if not data:
                    return b''.join(chunks)
                chunks.append(data)
                if slow and len(chunks) % 16 == 0:
                    time.sleep(0.001)

        """
}
