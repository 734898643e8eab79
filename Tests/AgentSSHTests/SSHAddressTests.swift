import AgentCore
import AgentHTTP
import AgentTestSupport
import ArgumentParser
import Logging
import NIOCore
import NIOPosix
@testable import AgentSSH
import Testing

/// `--ssh-address` beyond loopback is an unauthenticated shell for anyone who can reach it:
/// refused unless `--ssh-allow-non-loopback` says the operator means it, and then warned
/// about in the HTTP API's words.
struct SSHAddressTests {
    static func resolve(_ arguments: [String], _ environment: [String: String] = [:]) throws -> SSHOptions.Configuration {
        try SSHOptions.parse(arguments).resolve(Settings(environment: environment))
    }

    @Test func anAddressBeyondLoopbackIsRefusedWithoutTheFlag() throws {
        for address in ["0.0.0.0:2222", "[::]:2222", "192.0.2.10:22"] {
            #expect {
                try Self.resolve(["--ssh-address", address])
            } throws: { error in
                "\(error)".contains("--ssh-address") && "\(error)".contains("--ssh-allow-non-loopback")
            }
        }
        #expect {
            try Self.resolve([], ["CODER_AGENT_SSH_ADDRESS": "0.0.0.0:2222"])
        } throws: { error in "\(error)".hasPrefix("CODER_AGENT_SSH_ADDRESS: ") }
        // Loopback needs nothing.
        for address in ["127.0.0.1:2222", "[::1]:2222", "localhost:2222"] {
            #expect(try Self.resolve(["--ssh-address", address]).address != nil)
        }
    }

    @Test func theFlagOrItsVariableAllowsIt() throws {
        let flagged = try Self.resolve(["--ssh-address", "0.0.0.0:2222", "--ssh-allow-non-loopback", "true"])
        #expect(flagged.address?.description == "0.0.0.0:2222" && flagged.allowNonLoopback)
        let variable = try Self.resolve([], ["CODER_AGENT_SSH_ADDRESS": "0.0.0.0:2222", "CODER_AGENT_SSH_ALLOW_NON_LOOPBACK": "true"])
        #expect(variable.allowNonLoopback && variable.address != nil)
        #expect(throws: ConfigurationError.self) { try Self.resolve(["--ssh-allow-non-loopback", "maybe"]) }
    }

    @Test func anAllowedAddressBeyondLoopbackIsWarnedAboutInTheHTTPAPIsWords() throws {
        let log = CapturedLog(level: .info)
        let exposed = try Self.resolve(["--ssh-address", "0.0.0.0:2222", "--ssh-allow-non-loopback", "true"])
        _ = SSHModule(configuration: exposed, context: .forTests(), logger: log.logger)
        let warning = try #require(log.all.first { $0.level == .warning }, "\(log.text)")
        #expect(warning.message == "SSH server listens beyond loopback", "\(log.text)")
        #expect(warning.metadata["address"] == "0.0.0.0:2222", "\(log.text)")
        #expect(HTTPOptions.beyondLoopbackWarning("HTTP API") == "HTTP API listens beyond loopback")
        let quiet = CapturedLog(level: .info)
        _ = SSHModule(configuration: try Self.resolve(["--ssh-address", "127.0.0.1:2222"]), context: .forTests(), logger: quiet.logger)
        #expect(!quiet.all.contains { $0.level == .warning }, "\(quiet.text)")
    }
}

/// Where `ssh -R` listens: the bind address mapped without a lookup on the loop.
struct ReverseForwardingAddressTests {
    @Test func bindAddresses() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        #expect(try await ReverseForwarding.bindAddress("", port: 80, on: loop).get().ipAddress == "0.0.0.0")
        // OpenSSH's default: IPv4, as Go's net.Listen takes it (a lookup may give ::1 first).
        #expect(try await ReverseForwarding.bindAddress("localhost", port: 80, on: loop).get().ipAddress == "127.0.0.1")
        #expect(try await ReverseForwarding.bindAddress("::1", port: 80, on: loop).get().ipAddress == "::1")
        let named = try await ReverseForwarding.bindAddress("127.0.0.2", port: 8080, on: loop).get()
        #expect(named.ipAddress == "127.0.0.2" && named.port == 8080)
    }
}
