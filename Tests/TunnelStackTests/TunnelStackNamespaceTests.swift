import AgentTestSupport
import NIOCore
import Foundation
import Glibc
import Synchronization
import Testing
import TunnelStack

/// The stack behind a real kernel: a private network namespace whose TUN carries its
/// packets (see ``NamespaceTunnel``); curl, Python and `ip` run inside the namespace, and
/// forwards reach servers on 127.0.0.1 in the test's own namespace. Needs root and
/// /dev/net/tun: without them each test fails saying what is missing.
@Suite(.serialized)
struct TunnelStackNamespaceTests {
    @Test func pingIsAnsweredOnBothAddresses() async throws {
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x10))
        for address in tunnel.addresses {
            let outcome = await tunnel.python(pingScript(address))
            #expect(outcome.status == 0, "\(outcome.stdout)")
            #expect(outcome.stdout.contains("reply \(address)"), "\(outcome.stdout)")
        }
        await tunnel.close()
    }

    @Test func httpPortIsServedAsChannels() async throws {
        let served = Recorder()
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x11), acceptors: httpAcceptor(served: served))
        for address in tunnel.addresses {
            let outcome = await tunnel.run(["/usr/bin/curl", "-g", "-s", "--max-time", "20", "http://[\(address)]:4/hello"])
            #expect(outcome.status == 0, "curl: \(outcome.stdout)")
            #expect(outcome.stdout.hasPrefix("hello [\(NamespaceTunnel.peerAddress)]:"), "\(outcome.stdout)")
            #expect(outcome.stdout.hasSuffix("GET /hello HTTP/1.1\n"), "\(outcome.stdout)")
        }
        #expect(served.all.count == 2)
        let drained = await eventually(timeout: .seconds(20)) { tunnel.stack.counters().openConnections == 0 }
        #expect(drained)
        let counters = tunnel.stack.counters()
        #expect(counters.accepted == 2)
        #expect(counters.bytesToTunnel > 0 && counters.bytesFromTunnel > 0)
        await tunnel.close()
    }

    @Test func forwardsTenMiBExactlyEachWay() async throws {
        let size = 10 << 20
        let received = Mutex<(count: Int, match: Bool)?>(nil)
        let toServer = pattern(size, step: 7, offset: 3)
        let toClient = pattern(size, step: 13, offset: 5)
        let server = try #require(
            LocalServer { connection in
                let writer = TestFlag()
                Thread {
                    _ = writeAll(connection, toClient)
                    shutdown(connection, Int32(SHUT_WR))
                    writer.set()
                }.start()
                let bytes = readAll(connection, limit: size + 1)
                received.withLock { $0 = (bytes.count, bytes == toServer) }
                // Bounded: the writer ends when the peer reads or the connection fails.
                let deadline = ContinuousClock.now + .seconds(120)
                while !writer.isSet, ContinuousClock.now < deadline { usleep(10_000) }
            })
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x12))
        let address = tunnel.addresses[0]
        let script = pythonTransferScript(host: "\(address)", port: server.port, size: size)
        let outcome = await tunnel.python(script)
        #expect(outcome.stdout.contains("received \(size) match True"), "\(outcome.stdout)")
        await server.finished.wait(upTo: .seconds(120))
        let result = received.withLock { $0 }
        #expect(result?.count == size)
        #expect(result?.match == true)
        if let seconds = outcome.stdout.split(separator: " ").last.flatMap({ Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) {
            // Reported, not asserted: 10 MiB each way at once through the stack.
            print("tunnel throughput: 2 × 10 MiB in \(seconds) s = \(String(format: "%.1f", 20 / seconds)) MiB/s")
        }
        let counters = tunnel.stack.counters()
        #expect(counters.forwarded == 1)
        #expect(counters.bytesFromTunnel == UInt64(size) && counters.bytesToTunnel == UInt64(size))
        server.stop()
        await tunnel.close()
    }

    @Test func nothingListeningAndReservedPortsAreRefused() async throws {
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x13))
        let address = tunnel.addresses[0]
        let unused = freeLoopbackPort()
        for port in [unused, 5, 1, 4] {
            let outcome = await tunnel.python(connectScript(address, port))
            #expect(outcome.stdout.hasPrefix("refused"), "port \(port): \(outcome.stdout)")
        }
        let counters = tunnel.stack.counters()
        // At least once: on a loaded host the client's SYN can be retransmitted before the
        // first refusal reaches it, and the late copy is a second attempt refused alike.
        #expect(counters.refusedNoListener >= 1)
        #expect(counters.refusedReservedPort == 2)
        #expect(counters.refusedOther == 1)  // port 4 without an HTTP handler
        #expect(counters.halfOpenConnections == 0)
        await tunnel.close()
    }

    @Test func synFloodStaysWithinTheHalfOpenBound() async throws {
        var configuration = TunnelStackConfiguration()
        configuration.maxHalfOpen = 8
        let served = Recorder()
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x14), configuration: configuration, acceptors: httpAcceptor(served: served))
        let address = tunnel.addresses[0]
        let flood = await tunnel.python(floodScript(address, count: 200, flags: 0x02, sequenceOffset: 0))
        #expect(flood.stdout.contains("sent 200"), "\(flood.stdout)")
        let dropped = await eventually(timeout: .seconds(20)) { tunnel.stack.counters().droppedHalfOpenLimit >= 192 }
        #expect(dropped, "\(tunnel.stack.counters())")
        #expect(tunnel.stack.counters().halfOpenConnections <= 8)
        // Still answering: echo works while the half-open table is full.
        let ping = await tunnel.python(pingScript(address))
        #expect(ping.stdout.contains("reply \(address)"), "\(ping.stdout)")
        // The flood's sources reset their handshakes: the slots free, connections work again.
        let resets = await tunnel.python(floodScript(address, count: 200, flags: 0x04, sequenceOffset: 1))
        #expect(resets.stdout.contains("sent 200"), "\(resets.stdout)")
        let freed = await eventually(timeout: .seconds(20)) { tunnel.stack.counters().halfOpenConnections == 0 }
        #expect(freed, "\(tunnel.stack.counters())")
        let curl = await tunnel.run(["/usr/bin/curl", "-g", "-s", "--max-time", "20", "http://[\(address)]:4/after"])
        #expect(curl.stdout.contains("GET /after"), "\(curl.stdout)")
        await tunnel.close()
    }

    @Test func aPeerThatNeverReadsHoldsABoundedAmount() async throws {
        let written = Mutex<Int>(0)
        let limit = 64 << 20
        let server = try #require(
            LocalServer { connection in
                var size: Int32 = 65536
                setsockopt(connection, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
                _ = fcntl(connection, F_SETFL, fcntl(connection, F_GETFL) | O_NONBLOCK)
                let chunk = [UInt8](repeating: 0x5A, count: 65536)
                var total = 0
                // Write until two seconds pass without progress (the stack stopped reading) or
                // the limit (unbounded buffering somewhere).
                while total < limit {
                    let count = chunk.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                    if count > 0 {
                        total += count
                        continue
                    }
                    guard errno == EAGAIN || errno == EINTR else { break }
                    var poller = pollfd(fd: connection, events: Int16(POLLOUT), revents: 0)
                    if poll(&poller, 1, 2000) == 0 { break }
                }
                written.withLock { $0 = total }
            })
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x15))
        let script = """
            import socket, time
            s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(('\(tunnel.addresses[0])', \(server.port)))
            print('connected', flush=True)
            time.sleep(120)
            """
        let client = try #require(tunnel.startPython(script))
        await server.finished.wait(upTo: .seconds(90))
        let total = written.withLock { $0 }
        let counters = tunnel.stack.counters()
        client.kill()
        print("a peer that never reads: the local server could write \(total) bytes before the stack stopped reading")
        // Local socket buffers (64 KiB send, the stack's receive), one pending read, lwIP's
        // 64 KiB send buffer and the peer's small receive buffer: well under 4 MiB.
        #expect(total > 0 && total < 4 << 20, "the server wrote \(total) bytes")
        #expect(counters.openConnections == 1)
        #expect(counters.bytesToTunnel < 1 << 20, "\(counters)")
        server.stop()
        await tunnel.close()
    }

    @Test func idleConnectionsAreResetBothWays() async throws {
        var configuration = TunnelStackConfiguration()
        configuration.idleTimeout = .milliseconds(500)
        let closedLocally = Mutex<Bool>(false)
        let server = try #require(
            LocalServer { connection in
                // Nothing is sent either way; the read ends when the stack closes the connection.
                let bytes = readAll(connection, limit: 1)
                closedLocally.withLock { $0 = bytes.isEmpty }
            })
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x16), configuration: configuration)
        let script = """
            import socket
            s = socket.create_connection(('\(tunnel.addresses[0])', \(server.port)), timeout=20)
            try:
                data = s.recv(10)
                print('closed' if data == b'' else 'data')
            except ConnectionResetError:
                print('reset')
            except Exception as error:
                print('error', type(error).__name__)
            """
        let outcome = await tunnel.python(script)
        #expect(outcome.stdout.hasPrefix("reset"), "\(outcome.stdout)")
        await server.finished.wait(upTo: .seconds(20))
        #expect(closedLocally.withLock { $0 })
        #expect(tunnel.stack.counters().idleTimeouts == 1)
        server.stop()
        await tunnel.close()
    }

    // MARK: scripts

    private func pingScript(_ address: TunnelAddress) -> String {
        """
        import socket
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
        s.settimeout(10)
        s.sendto(bytes([128, 0, 0, 0, 0x12, 0x34, 0, 1]) + b'ping', ('\(address)', 0))
        for _ in range(100):
            data, source = s.recvfrom(2048)
            if data[0] == 129 and data[4:6] == bytes([0x12, 0x34]) and data[8:] == b'ping':
                print('reply', source[0])
                break
        """
    }

    private func connectScript(_ address: TunnelAddress, _ port: Int) -> String {
        """
        import socket, time
        start = time.monotonic()
        try:
            socket.create_connection(('\(address)', \(port)), timeout=20)
            print('connected')
        except ConnectionRefusedError:
            print('refused %.3f' % (time.monotonic() - start))
        except Exception as error:
            print('error', type(error).__name__, error)
        """
    }

    /// Sends `count` TCP segments with `flags` to port 4 from spoofed sources
    /// fd7a:115c:a1e0::1000+i (on the TUN's /64, not assigned: the SYN-ACKs go nowhere),
    /// sequence 1000 * i + `sequenceOffset`.
    private func floodScript(_ address: TunnelAddress, count: Int, flags: Int, sequenceOffset: Int) -> String {
        """
        import socket, struct
        def checksum(data):
            if len(data) % 2:
                data += b'\\0'
            total = sum(struct.unpack('!%dH' % (len(data) // 2), data))
            while total >> 16:
                total = (total & 0xffff) + (total >> 16)
            return ~total & 0xffff
        destination = socket.inet_pton(socket.AF_INET6, '\(address)')
        sock = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        for i in range(\(count)):
            source = socket.inet_pton(socket.AF_INET6, 'fd7a:115c:a1e0::%x' % (0x1000 + i))
            tcp = struct.pack('!HHIIBBHHH', 20000 + i, 4, 1000 * i + \(sequenceOffset), 0, 5 << 4, \(flags), 65535, 0, 0)
            pseudo = source + destination + struct.pack('!I', len(tcp)) + b'\\0\\0\\0\\x06'
            tcp = tcp[:16] + struct.pack('!H', checksum(pseudo + tcp)) + tcp[18:]
            header = struct.pack('!IHBB', 6 << 28, len(tcp), 6, 64) + source + destination
            sock.sendto(header + tcp, ('\(address)', 0))
        print('sent', \(count))
        """
    }
}
