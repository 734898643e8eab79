import Testing

@testable import OutboundProxy

/// The proxy choice against Go's own `httpproxy` cases (golang.org/x/net/http/httpproxy).
@Suite(.timeLimit(.minutes(1)))
struct ProxyEnvironmentTests {
    private func choose(_ environment: [String: String], _ url: String = "http://example.com") throws -> String {
        try ProxyEnvironment(environment: environment).proxy(url: url).map { $0.description } ?? "direct"
    }

    @Test func proxyValuesAreURLsOrHostsReadAsHTTP() throws {
        #expect(try choose(["HTTP_PROXY": "127.0.0.1:8080"]) == "http://127.0.0.1:8080")
        #expect(try choose(["HTTP_PROXY": "cache.corp.example.com:1234"]) == "http://cache.corp.example.com:1234")
        #expect(try choose(["HTTP_PROXY": "cache.corp.example.com"]) == "http://cache.corp.example.com:80")
        #expect(try choose(["HTTP_PROXY": "localhost"]) == "http://localhost:80")
        #expect(try choose(["HTTP_PROXY": "https://cache.corp.example.com"]) == "https://cache.corp.example.com:443")
        #expect(try choose(["HTTP_PROXY": "socks5://127.0.0.1"]) == "socks5://127.0.0.1:1080")
        #expect(try choose(["HTTP_PROXY": "http://[fd00::1]:3128"]) == "http://[fd00::1]:3128")
    }

    @Test func eachSchemeTakesItsOwnVariable() throws {
        let both = ["HTTP_PROXY": "http.proxy.tld", "HTTPS_PROXY": "secure.proxy.tld"]
        #expect(try choose(both, "http://insecure.tld/") == "http://http.proxy.tld:80")
        #expect(try choose(both, "https://secure.tld/") == "http://secure.proxy.tld:80")
        #expect(try choose(both, "ws://insecure.tld/") == "http://http.proxy.tld:80")
        #expect(try choose(both, "wss://secure.tld/") == "http://secure.proxy.tld:80")
        #expect(try choose(["HTTP_PROXY": "http.proxy.tld"], "https://secure.tld/") == "direct")
        #expect(try choose(["HTTP_PROXY": "http.proxy.tld"], "ftp://insecure.tld/") == "direct")
        #expect(try choose([:]) == "direct")
    }

    @Test func uppercaseWinsAndEmptyIsUnset() throws {
        #expect(try choose(["HTTP_PROXY": "upper", "http_proxy": "lower"]) == "http://upper:80")
        #expect(try choose(["HTTP_PROXY": "", "http_proxy": "lower"]) == "http://lower:80")
        #expect(try choose(["https_proxy": "lower"], "https://x.example") == "http://lower:80")
        #expect(try choose(["HTTP_PROXY": "proxy", "no_proxy": "example.com"]) == "direct")
    }

    @Test func cgiRefusesHTTPProxyButNotHTTPSProxy() throws {
        #expect(throws: ProxyError.refusedInCGI) { try choose(["HTTP_PROXY": "http://10.1.2.3:8080", "REQUEST_METHOD": "GET"]) }
        #expect(try choose(["HTTPS_PROXY": "https://secure.proxy.tld", "REQUEST_METHOD": "GET"], "https://secure.tld/") == "https://secure.proxy.tld:443")
        #expect(try choose(["HTTP_PROXY": "http://10.1.2.3:8080", "REQUEST_METHOD": ""]) == "http://10.1.2.3:8080")
    }

    @Test func noProxyDomains() throws {
        #expect(try choose(["NO_PROXY": "example.com", "HTTP_PROXY": "proxy"], "http://example.com/") == "direct")
        #expect(try choose(["NO_PROXY": ".example.com", "HTTP_PROXY": "proxy"], "http://example.com/") == "http://proxy:80")
        #expect(try choose(["NO_PROXY": "ample.com", "HTTP_PROXY": "proxy"], "http://example.com/") == "http://proxy:80")
        #expect(try choose(["NO_PROXY": "example.com", "HTTP_PROXY": "proxy"], "http://foo.example.com/") == "direct")
        #expect(try choose(["NO_PROXY": ".foo.com", "HTTP_PROXY": "proxy"], "http://example.com/") == "http://proxy:80")
        #expect(try choose(["NO_PROXY": " EXAMPLE.com ", "HTTP_PROXY": "proxy"], "http://Example.COM/") == "direct")
    }

    /// Go's `TestUseProxy` table: every host on port 80 against one `NO_PROXY`.
    @Test(arguments: [
        ("localhost", false), ("127.0.0.1", false), ("127.0.0.2", false), ("[::1]", false), ("[::2]", true),
        ("192.168.1.1", false), ("192.168.1.2", true), ("192.168.1.3", false), ("192.168.1.4", true), ("10.0.0.2", false),
        ("[2001:db8::52:0:1]", false), ("[2001:db8::52:0:2]", true), ("[2001:db8::52:0:3]", false), ("[2002:db8:a::123]", false),
        ("[fe80::424b:c8be:1643:a1b6]", true),
        ("barbaz.net", true), ("www.barbaz.net", false), ("foobar.com", false), ("www.foobar.com", false), ("foofoobar.com", true),
        ("baz.com", true), ("localhost.net", true), ("local.localhost", true), ("barbarbaz.net", true), ("wildcard.io", true),
        ("nested.wildcard.io", false), ("awildcard.io", true),
    ])
    func useProxy(host: String, proxied: Bool) throws {
        let noProxy =
            "foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, 192.168.1.3:80, 10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, [2001:db8::52:0:3]:80, 2002:db8:a::45/64"
        let environment = ["HTTP_PROXY": "proxy:3128", "NO_PROXY": noProxy]
        #expect(try choose(environment, "http://\(host):80/") == (proxied ? "http://proxy:3128" : "direct"))
        // `*` exempts every host.
        #expect(try choose(["HTTP_PROXY": "proxy:3128", "NO_PROXY": "x.example, *"], "http://\(host):80/") == "direct")
    }

    @Test func malformedNoProxyEntriesAreSkipped() throws {
        #expect(try choose(["HTTP_PROXY": "proxy", "NO_PROXY": ":1,,  ,[,/8"], "http://example.com/") == "http://proxy:80")
        // A port given as a name matches no numeric port (Go compares the text).
        #expect(try choose(["HTTP_PROXY": "proxy", "NO_PROXY": "example.com:http"], "http://example.com/") == "http://proxy:80")
        #expect(try choose(["HTTP_PROXY": "proxy", "NO_PROXY": "example.com:8080"], "http://example.com:8080/") == "direct")
    }

    @Test func anIPv4MappedAddressIsItsIPv4Form() throws {
        #expect(try choose(["HTTP_PROXY": "proxy"], "http://[::ffff:127.0.0.1]/") == "direct")
        #expect(try choose(["HTTP_PROXY": "proxy", "NO_PROXY": "10.1.2.3"], "http://[::ffff:10.1.2.3]/") == "direct")
    }

    @Test func anInvalidProxyFailsOnlyTheRequestsThatWouldUseIt() throws {
        let environment = ["HTTP_PROXY": "foo://host", "NO_PROXY": "internal.example"]
        #expect(throws: ProxyError.self) { try choose(environment, "http://example.com/") }
        #expect(try choose(environment, "http://internal.example/") == "direct")
        #expect(try choose(environment, "http://127.0.0.1/") == "direct")
        // Its text (which may hold credentials) is not in the message.
        let secret = ["HTTP_PROXY": "foo://user:hunter2@host"]
        do {
            _ = try choose(secret)
            Issue.record("no error")
        } catch {
            #expect(!String(describing: error).contains("hunter2"))
        }
    }

    @Test func aValueThatIsNotAURLIsIgnoredAsGoIgnoresIt() throws {
        #expect(try choose(["HTTP_PROXY": "http://[::1"]) == "direct")
        #expect(try choose(["HTTP_PROXY": "socks5h://proxy:1081"]) == "socks5://proxy:1081")
    }

    @Test func theEnvironmentsDescriptionAndMirrorsHideCredentials() throws {
        let environment = ProxyEnvironment(environment: ["HTTPS_PROXY": "http://user:hunter2@proxy:3128", "HTTP_PROXY": "ftp://u:hunter2@x"])
        #expect(!"\(environment)".contains("hunter2"))
        var dumped = ""
        dump(environment, to: &dumped)
        let server = try #require(try environment.proxy(url: "https://a.example"))
        dump(server, to: &dumped)
        dump(ProxyError.invalidProxy("ftp://u:hunter2@x"), to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(dumped.contains("proxy"))
    }

    @Test func credentialsBecomeBasicAuthorizationAndStayOutOfTheDescription() throws {
        let proxy = try #require(try ProxyEnvironment(environment: ["HTTPS_PROXY": "http://us%40er:p%3Ass@proxy.example:3128"]).proxy(url: "https://a.example"))
        #expect(proxy.username == "us@er")
        #expect(proxy.password == "p:ss")
        // base64("us@er:p:ss")
        #expect(proxy.authorization == "Basic dXNAZXI6cDpzcw==")
        #expect(proxy.description == "http://proxy.example:3128")
        #expect(try ProxyEnvironment(environment: ["HTTPS_PROXY": "proxy.example"]).proxy(url: "https://a.example")?.authorization == nil)
    }

    @Test func routesTunnelSecureTargetsAndForwardPlainOnes() throws {
        let environment = ProxyEnvironment(environment: ["HTTP_PROXY": "proxy:3128", "HTTPS_PROXY": "proxy:3129"])
        let secure = ProxyServer(kind: .http, host: "proxy", port: 3129)
        let plain = ProxyServer(kind: .http, host: "proxy", port: 3128)
        #expect(try ProxyRoute.choose(scheme: "wss", host: "a.example", port: 443, environment: environment) == .tunnel(secure))
        #expect(try ProxyRoute.choose(scheme: "http", host: "a.example", port: 80, environment: environment) == .forward(plain))
        #expect(try ProxyRoute.choose(scheme: "ws", host: "a.example", port: 80, environment: environment, alwaysTunnel: true) == .tunnel(plain))
        #expect(try ProxyRoute.choose(scheme: "https", host: "127.0.0.1", port: 443, environment: environment) == .direct)
        let socks = ProxyEnvironment(environment: ["HTTPS_PROXY": "socks5://proxy"])
        // DERP's choice (Tailscale's client tunnels through HTTP proxies only); the other dials
        // allow SOCKS5.
        #expect(throws: ProxyError.self) { try ProxyRoute.choose(scheme: "https", host: "a.example", port: 443, environment: socks, alwaysTunnel: true) }
        #expect(
            try ProxyRoute.choose(scheme: "wss", host: "a.example", port: 443, environment: socks, alwaysTunnel: true, anyProxyKind: true)
                == .socks(ProxyServer(kind: .socks5, host: "proxy", port: 1080)))
    }
}
