import AgentSystem
import Testing

@Suite struct HostLookupTests {
    /// Literals give themselves, each in its own family; `localhost` gives the loopback
    /// address (from `/etc/hosts`); an empty name gives nothing.
    @Test func literalsNamesAndNothing() {
        let v4 = HostLookup.firstAddresses(of: "127.0.0.1", datagram: true)
        #expect(v4.ipv4 == "127.0.0.1" && v4.ipv6 == nil)
        let v6 = HostLookup.firstAddresses(of: "::1", datagram: false)
        #expect(v6.ipv4 == nil && v6.ipv6 == "::1")
        #expect(HostLookup.firstAddresses(of: "localhost", datagram: false).ipv4 == "127.0.0.1")
        let none = HostLookup.firstAddresses(of: "", datagram: true)
        #expect(none.ipv4 == nil && none.ipv6 == nil)
    }
}
