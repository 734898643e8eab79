import AgentSystem
import Testing

struct FIFOQueueTests {
    @Test func elementsLeaveInOrderAcrossCompactions() {
        var queue = FIFOQueue<Int>()
        var taken: [Int] = []
        for value in 0..<200 { queue.append(value) }
        // 150 taken: past 64 and half the array, so the taken prefix is dropped meanwhile.
        for _ in 0..<150 { taken.append(queue.popFirst()!) }
        #expect(queue.count == 50)
        for value in 200..<300 { queue.append(value) }
        #expect(queue.count == 150)
        while let value = queue.popFirst() { taken.append(value) }
        #expect(taken == Array(0..<300))
        #expect(queue.count == 0 && queue.popFirst() == nil)
        queue.append(7)
        #expect(queue.count == 1 && queue.popFirst() == 7)
    }

    @Test func aTakenElementIsFreedAtOnce() {
        final class Box {}
        var queue = FIFOQueue<Box>()
        weak var first: Box?
        do {
            let box = Box()
            first = box
            queue.append(box)
        }
        queue.append(Box())
        #expect(first != nil)
        _ = queue.popFirst()
        // The second is still queued, so the array was not reset: the slot itself let go.
        #expect(first == nil && queue.count == 1)
    }

    @Test func containsSeesOnlyWaitingElements() {
        var queue = FIFOQueue<Int>()
        for value in 1...3 { queue.append(value) }
        #expect(queue.popFirst() == 1)
        #expect(!queue.contains { $0 == 1 })
        #expect(queue.contains { $0 == 2 } && queue.contains { $0 == 3 })
    }
}
