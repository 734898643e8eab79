import AgentTestSupport
import Foundation
import Testing
import WireGuard
#if canImport(Glibc)
import Glibc
#endif

/// Interop with the real wireguard-go (Debian's) in a private network namespace: it and our
/// device handshake both ways and carry ICMPv6 echoes. Needs root, /dev/net/tun,
/// wireguard-go, wg, ip, unshare, nsenter and busybox (for `ping`); when any is missing the
/// test fails and says which.
@Suite(.serialized) struct WireGuardGoInteropTests {
    static let wgAddress = IPAddress("fd7a:115c:a1e0::1")!
    static let ourAddress = IPAddress("fd7a:115c:a1e0::2")!

    /// What is missing for the test, or nil.
    static func missing() -> String? {
        for tool in ["/usr/bin/wireguard-go", "/usr/bin/wg", "/usr/sbin/ip", "/usr/bin/unshare", "/usr/bin/nsenter", "/usr/bin/busybox"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (Debian: wireguard-go, wireguard-tools, iproute2, util-linux, busybox)"
        }
        if !FileManager.default.fileExists(atPath: "/dev/net/tun") { return "/dev/net/tun is missing: wireguard-go needs a TUN device" }
        if getuid() != 0 { return "the test must run as root (network namespaces, TUN)" }
        return nil
    }

    @Test func wireguardGoAndOurDeviceHandshakeBothWays() async throws {
        if let missing = Self.missing() {
            Issue.record("wireguard-go interop cannot run: \(missing)")
            return
        }
        guard let namespace = await NetworkNamespace.make() else {
            Issue.record("wireguard-go interop cannot run: `unshare -n` gave no private network namespace")
            return
        }
        let interface = "wgt\(getpid() % 100_000)"
        let keyFile = NSTemporaryDirectory() + "/\(interface).key"
        var wireguardGo: ChildProgram.Running?
        var socketFD: Int32 = -1
        defer {
            if socketFD >= 0 { close(socketFD) }
            unlink(keyFile)
        }
        func cleanUp() async {
            _ = await namespace.run(["ip", "link", "del", interface])
            if let wireguardGo { await onThread { wireguardGo.kill() } }
            await namespace.shutDown()
        }

        let wgKey = WireGuardPrivateKey.generate()
        let ourKey = WireGuardPrivateKey.generate()
        #expect(FileManager.default.createFile(atPath: keyFile, contents: Data(Data(wgKey.raw.bytes).base64EncodedString().utf8)))
        _ = await namespace.run(["ip", "link", "set", "lo", "up"])
        wireguardGo = namespace.start(["wireguard-go", "-f", interface], environment: ["WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD": "1"])
        let socketReady = await eventually { unixSocketAccepts("/var/run/wireguard/\(interface).sock") }
        guard wireguardGo != nil, socketReady else {
            Issue.record("wireguard-go did not start (no UAPI socket /var/run/wireguard/\(interface).sock)")
            await cleanUp()
            return
        }
        guard let udp = await namespace.udpSocket() else {
            Issue.record("could not make a UDP socket inside the namespace (setns)")
            await cleanUp()
            return
        }
        socketFD = udp.fd
        let ourPublic = Data(ourKey.publicKey.bytes).base64EncodedString()
        let setup: [[String]] = [
            [
                "wg", "set", interface, "private-key", keyFile, "listen-port", "0",
                "peer", ourPublic, "allowed-ips", "\(Self.ourAddress)/128", "endpoint", "127.0.0.1:\(udp.port)",
            ],
            ["ip", "-6", "addr", "add", "\(Self.wgAddress)/128", "dev", interface, "nodad"],
            ["ip", "link", "set", interface, "up"],
            ["ip", "-6", "route", "add", "\(Self.ourAddress)/128", "dev", interface],
        ]
        for command in setup {
            let outcome = await namespace.run(command)
            guard outcome.status == 0 else {
                Issue.record("\(command.joined(separator: " ")) failed (\(outcome.status)): \(outcome.stdout)")
                await cleanUp()
                return
            }
        }
        let portText = await namespace.run(["wg", "show", interface, "listen-port"]).stdout
        guard let wgPort = UInt16(portText.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            Issue.record("no listen port from wg show: \(portText)")
            await cleanUp()
            return
        }

        func makeDevice() throws -> WireGuardDevice {
            var device = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: ourKey, mtu: 1420))
            try device.setPeer(WireGuardPeerConfiguration(publicKey: wgKey.publicKey, allowedIPs: [IPPrefix(Self.wgAddress, bits: 128)!]))
            return device
        }

        // 1. wireguard-go initiates: `ping` inside the namespace to our address. Our device
        //    answers the handshake, decrypts the echo requests and sends echo replies.
        let responder = try makeDevice()
        let fd = udp.fd
        let namespacePath = namespace.path
        let first = await onThread { () -> (pingStatus: Int32, requests: Int, counters: WireGuardCounters, results: [WireGuardReceiveResult]) in
            var pump = UDPPump(device: responder, fd: fd, peerPort: wgPort)
            guard
                let ping = ChildProgram.start(
                    ["nsenter", "--net=\(namespacePath)", "busybox", "ping", "-6", "-c", "3", "-w", "25", "\(Self.ourAddress)"], stderrToStdout: true)
            else { return (-1, 0, pump.device.counters, []) }
            var requests = 0
            var status: Int32 = -1
            _ = pump.run(
                seconds: 40,
                onPacket: { packet in
                    guard let echo = echoRequest(in: packet), echo.destination == Self.ourAddress else { return [] }
                    requests += 1
                    return [
                        icmpv6Echo(
                            reply: true, source: echo.destination, destination: echo.source,
                            identifier: echo.identifier, sequence: echo.sequence, data: echo.data)
                    ]
                },
                done: { _ in
                    var raw: Int32 = 0
                    guard waitpid(ping.pid, &raw, WNOHANG) == ping.pid else { return false }
                    status = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
                    return true
                })
            if status == -1 {
                ping.kill()
            } else {
                close(ping.stdin)
                close(ping.stdout)
            }
            return (status, requests, pump.device.counters, pump.results)
        }
        #expect(first.pingStatus == 0, "ping through wireguard-go to our responder exited \(first.pingStatus)")
        #expect(first.requests >= 3)
        #expect(first.counters.initiationsAnswered >= 1)
        #expect(first.counters.handshakesConfirmedAsResponder >= 1)
        #expect(first.results.contains(.initiationAnswered(wgKey.publicKey)))

        // 2. We initiate (a fresh device with the same key): our echo request to
        //    wireguard-go's address goes out after our handshake; the kernel behind its TUN
        //    answers through it.
        let initiator = try makeDevice()
        let second = await onThread { () -> (replies: Int, counters: WireGuardCounters, results: [WireGuardReceiveResult]) in
            var pump = UDPPump(device: initiator, fd: fd, peerPort: wgPort)
            pump.send(
                icmpv6Echo(
                    reply: false, source: Self.ourAddress, destination: Self.wgAddress, identifier: 0x5747, sequence: 1,
                    data: Array("from the swift initiator".utf8)))
            _ = pump.run(
                seconds: 30, onPacket: { _ in [] },
                done: { pump in
                    pump.delivered.contains { packet in
                        guard let view = IPPacketView(packet), view.nextHeader == 58, view.totalLength >= 48 else { return false }
                        return packet[40] == 129 && packet[44] == 0x57 && packet[45] == 0x47
                    }
                })
            return (pump.delivered.filter { $0.count >= 41 && $0[40] == 129 }.count, pump.device.counters, pump.results)
        }
        #expect(second.counters.initiationsSent >= 1)
        #expect(second.results.contains(.handshakeCompleted(wgKey.publicKey)))
        #expect(second.replies >= 1, "no echo reply from behind wireguard-go")
        let handshakes = await namespace.run(["wg", "show", interface, "latest-handshakes"]).stdout
        #expect(handshakes.contains(ourPublic) && !handshakes.contains("\t0\n"))

        await cleanUp()
        let gone = await namespace.run(["ip", "link", "show", interface])
        #expect(gone.status != 0 || !gone.stdout.contains(interface))
    }
}
