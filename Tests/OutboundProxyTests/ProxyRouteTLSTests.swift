import AgentTLS
import AgentTestSupport
import Foundation
import Testing

@testable import OutboundProxy

/// TLS on the agent's own connections: the SNI sent, and what the identity check accepts.
@Suite(.timeLimit(.minutes(2)))
struct ProxyRouteTLSTests {
    static let proxy = ProxyServer(kind: .http, host: "127.0.0.1", port: 3128)

    /// A throwaway certificate for `CN=test` with subject alternative names `names` (openssl's
    /// syntax; none when empty).
    static func certificate(_ names: String) async throws -> [SubjectAlternativeName] {
        let made = try await TestCertificate.make(names: names, commonName: "test")
        defer { made.remove() }
        return try #require(SubjectAlternativeName.names(pem: made.pem))
    }

    /// SNI as Go's `hostnameInSNI`: names only, without trailing dots; an address in any of
    /// its forms sends none. Text that merely looks like an address is a name to Go too.
    @Test func serverNamesAreNamesOnly() {
        #expect(ProxyRoute.serverName(for: "coder.example.com") == "coder.example.com")
        #expect(ProxyRoute.serverName(for: "coder.example.com.") == "coder.example.com")
        for address in ["10.0.0.1", "::1", "[::1]", "fe80::1%eth0", "[fe80::1%eth0]", "::ffff:10.0.0.1", "10.0.0.1.", "::1."] {
            #expect(ProxyRoute.serverName(for: address) == nil, "\(address)")
        }
        for name in ["1.2.3.04", "+1.2.3.4", "010.0.0.1", "1.2.3"] {
            #expect(ProxyRoute.serverName(for: name) == name, "\(name)")
        }
        #expect(ProxyRoute.serverName(for: "") == nil)
        #expect(ProxyRoute.serverName(for: "...") == nil)
    }

    @Test func anAddressNeedsAnIPNameOfTheSameBytes() async throws {
        let v4 = try await Self.certificate("IP:10.0.0.1,DNS:example.com")
        #expect(CertificateIdentity.names("10.0.0.1", v4))
        #expect(CertificateIdentity.names("::ffff:10.0.0.1", v4), "the IPv4-mapped form is the same address")
        #expect(!CertificateIdentity.names("10.0.0.2", v4))
        #expect(!CertificateIdentity.names("127.0.0.1", v4), "not the proxy's")
        let v6 = try await Self.certificate("IP:2001:db8::1")
        #expect(CertificateIdentity.names("2001:db8::1", v6))
        #expect(CertificateIdentity.names("[2001:db8::1]", v6), "in brackets, as Go takes it")
        #expect(!CertificateIdentity.names("2001:db8::2", v6))
        // A DNS name that reads like the address is not an address.
        let named = try await Self.certificate("DNS:10.0.0.1")
        #expect(!CertificateIdentity.names("10.0.0.1", named))
    }

    /// Go's `matchHostnames`: one label for a leading `*`, ASCII case and a trailing dot aside;
    /// an IP name never stands for a name, nor does the subject's common name.
    @Test func aNameNeedsAMatchingDNSName() async throws {
        let certificate = try await Self.certificate("DNS:coder.example.com,DNS:*.apps.example.com,IP:127.0.0.1")
        #expect(CertificateIdentity.names("coder.example.com", certificate))
        #expect(CertificateIdentity.names("Coder.Example.COM.", certificate))
        #expect(CertificateIdentity.names("a.apps.example.com", certificate))
        #expect(!CertificateIdentity.names("apps.example.com", certificate), "a * stands for one label, not none")
        #expect(!CertificateIdentity.names("a.b.apps.example.com", certificate), "nor for two")
        #expect(!CertificateIdentity.names("example.com", certificate))
        #expect(!CertificateIdentity.names("coder.example.com.evil", certificate))
        #expect(!CertificateIdentity.names("coder..example.com", certificate))
        #expect(!CertificateIdentity.names("", certificate))
        #expect(!CertificateIdentity.names("1.2.3.04", certificate), "not an address, and no such name")
        // The common name does not count, as in Go, even without alternative names (where
        // other checks fall back to it).
        let commonNameOnly = try await Self.certificate("")
        #expect(!CertificateIdentity.names("test", commonNameOnly))
        // A bare `*` is no pattern; a DNS name with a trailing dot is matched exactly.
        let odd = try await Self.certificate("DNS:*,DNS:exact.example.com.")
        #expect(!CertificateIdentity.names("localhost", odd))
        #expect(CertificateIdentity.names("exact.example.com.", odd))
        #expect(!CertificateIdentity.names("exact.example.com", odd))
        // The wildcard applies to valid host names only (Go's `validHostname`).
        let wildcard = try await Self.certificate("DNS:*.example.com")
        #expect(CertificateIdentity.names("x_y.example.com", wildcard))
        #expect(!CertificateIdentity.names("-x.example.com", wildcard))
        #expect(!CertificateIdentity.names("a b.example.com", wildcard))
        // Only ASCII letters fold: a non-ASCII byte is compared as it is.
        let unicode = try await Self.certificate("DNS:xn--bcher-kva.example")
        #expect(CertificateIdentity.names("XN--BCHER-KVA.example", unicode))
        #expect(!CertificateIdentity.names("bücher.example", unicode))
    }
}
