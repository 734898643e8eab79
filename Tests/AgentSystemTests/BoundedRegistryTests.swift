import AgentSystem
import Testing

/// `BoundedRegistry`: at most its capacity, room again after a removal, one entry per identity.
struct BoundedRegistryTests {
    final class Member: Sendable {}

    @Test func admitsUpToTheCapacity() {
        let registry = BoundedRegistry<String>(capacity: 2)
        let (a, b, c) = (Member(), Member(), Member())
        #expect(registry.admit(ObjectIdentifier(a), "a"))
        #expect(registry.admit(ObjectIdentifier(b), "b"))
        #expect(!registry.admit(ObjectIdentifier(c), "c"), "full")
        #expect(registry.count == 2)
        #expect(Set(registry.all) == ["a", "b"])
        registry.remove(ObjectIdentifier(a))
        registry.remove(ObjectIdentifier(a))
        #expect(registry.count == 1)
        #expect(registry.admit(ObjectIdentifier(c), "c"))
        #expect(Set(registry.all) == ["b", "c"])
        #expect(registry.capacity == 2)
    }

    @Test func theSameIdentityIsOneEntry() {
        let registry = BoundedRegistry<Int>(capacity: 3)
        let member = Member()
        #expect(registry.admit(ObjectIdentifier(member), 1))
        #expect(registry.admit(ObjectIdentifier(member), 2))
        #expect(registry.count == 1)
        #expect(registry.all == [2])
        let empty = BoundedRegistry<Int>(capacity: 0)
        #expect(!empty.admit(ObjectIdentifier(member), 1))
        #expect(empty.all.isEmpty)
    }
}
