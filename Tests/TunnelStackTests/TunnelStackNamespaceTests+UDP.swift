import AgentTestSupport
import Testing
import TunnelStack

/// UDP from a real kernel: the namespace's Python sends datagrams to the stack's addresses,
/// which relays them to an echo server on 127.0.0.1 here; the kernel checks the checksums
/// of the answers.
extension TunnelStackNamespaceTests {
    @Test func udpIsRelayedToALoopbackServerAndBack() async throws {
        let server = try await UDPEchoServer.start()
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x17))
        for address in tunnel.addresses {
            let outcome = await tunnel.python(udpEchoScript(address, port: server.port))
            #expect(outcome.status == 0, "\(outcome.stdout)")
            #expect(outcome.stdout.contains("echo 5 from \(address) \(server.port)"), "\(outcome.stdout)")
            #expect(outcome.stdout.contains("echo 1232 from \(address) \(server.port)"), "\(outcome.stdout)")
        }
        let counters = tunnel.stack.counters()
        // One flow per address (the client's socket is new for each).
        #expect(counters.udpFlowsOpened == 2 && counters.udpFlowsOpen == 2)
        #expect(counters.udpDatagramsOut >= 4 && counters.udpDatagramsDropped == 0)
        await tunnel.close()
        await server.stop()
    }

    /// Sends "hello" and 1232 bytes (the most a 1280-byte packet carries) to
    /// `address`:`port` and prints `echo <length> from <address> <port>` for each answer that
    /// matches; each send is retried at most 5 times, 5 s apart.
    private func udpEchoScript(_ address: TunnelAddress, port: Int) -> String {
        """
        import socket
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.settimeout(5)
        for payload in [b'hello', bytes(i % 251 for i in range(1232))]:
            for attempt in range(5):
                s.sendto(payload, ('\(address)', \(port)))
                try:
                    data, source = s.recvfrom(4096)
                except socket.timeout:
                    continue
                if data == payload:
                    print('echo', len(data), 'from', source[0], source[1], flush=True)
                    break
        """
    }
}
