import AgentCore
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(3)))
struct UpwardSeamTests {
    @Test func aReceiptSettlesOnceForEveryWaiter() async {
        let receipt = UpwardReceipt()
        #expect(receipt.outcome == nil)
        async let first = receipt.wait()
        async let second = receipt.wait()
        try? await Task.sleep(for: .milliseconds(20))
        receipt.settle(.rejected("message is too long"))
        receipt.settle(.delivered)
        #expect(await first == .rejected("message is too long"))
        #expect(await second == .rejected("message is too long"))
        #expect(await receipt.wait() == .rejected("message is too long"), "a late waiter sees the first outcome")
    }

    @Test func aCancelledWaitEndsWithNil() async {
        let receipt = UpwardReceipt()
        let waiting = Task { await receipt.wait() }
        try? await Task.sleep(for: .milliseconds(20))
        waiting.cancel()
        #expect(await waiting.value == nil)
        receipt.settle(.delivered)
        #expect(UpwardReceipt.settled(.logged).outcome == .logged)
    }

    @Test func manifestSubscribersGetTheCurrentOneThenEachNewOne() async {
        let store = ManifestStore()
        store.publish(AgentManifest(directory: "/one", environment: [:], workspaceName: "w"))
        let stream = store.manifests()
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next()?.directory == "/one")
        store.publish(AgentManifest(directory: "/two", environment: ["A": "1"]))
        #expect(await iterator.next()?.environment == ["A": "1"])
        #expect(store.currentManifest?.directory == "/two")
    }

    @Test func publicationsAreNumberedFromOne() {
        let store = ManifestStore()
        #expect(store.currentPublication == nil)
        store.publish(AgentManifest(directory: "/one", environment: [:]))
        #expect(store.currentPublication?.number == 1)
        // The same manifest again (a reconnect) is a new publication.
        store.publish(AgentManifest(directory: "/one", environment: [:]))
        store.publish(AgentManifest(directory: "/two", environment: ["A": "1"]))
        #expect(store.currentPublication?.number == 3)
        #expect(store.currentPublication?.manifest.environment == ["A": "1"])
    }

    @Test func manifestSubscriptionsAreBoundedAndEndWithTheirConsumer() async {
        let store = ManifestStore()
        var streams = (0..<ManifestStore.maxSubscribers).map { _ in store.manifests() }
        #expect(store.subscriberCount == ManifestStore.maxSubscribers)
        var extra = store.manifests().makeAsyncIterator()
        #expect(await extra.next() == nil, "one too many finishes at once")
        streams.removeAll()
        #expect(store.subscriberCount == 0, "dropping a stream unsubscribes")
    }
}
