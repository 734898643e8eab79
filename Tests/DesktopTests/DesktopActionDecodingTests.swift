import AgentHTTP
import AgentTestSupport
import Foundation
import Testing

@testable import Desktop

/// `DesktopAction.decode(json:)`, the pure check of an `/action` body (no desktop): every
/// bound of ``DesktopLimits`` at and past its edge, and random bodies full of extreme
/// numbers that must be answered, never trapped on. Also the action queue's cancellation.
struct DesktopActionDecodingTests {
    /// The status and message `decode` answers for `json` (200 and the action's name when
    /// it is accepted).
    static func outcome(_ json: String) -> (status: Int, message: String) {
        do {
            let action = try DesktopAction.decode(json: Array(json.utf8))
            return (200, action.name)
        } catch {
            return (error.statusCode, error.body.message)
        }
    }

    /// A body of the wrong shape names the field that is wrong.
    @Test(
        arguments: [
            (#"{"action":"mouse_move","coordinate":"x"}"#, "json: cannot unmarshal string into Go struct field DesktopAction.coordinate of type []int"),
            (#"{"action":"mouse_move","coordinate":[1,"y"]}"#, "json: cannot unmarshal string into Go struct field DesktopAction.coordinate of type int"),
            (#"{"action":"scroll","scroll_amount":1e30}"#, "json: cannot unmarshal number 1e30 into Go struct field DesktopAction.scroll_amount of type int"),
            (#"{"action":7}"#, "json: cannot unmarshal number into Go struct field DesktopAction.action of type string"),
            (#"{"action":"#, "unexpected EOF"),
        ] as [(String, String)])
    func wrongShapesNameTheField(json: String, field: String) {
        do {
            _ = try DesktopAction.decode(json: Array(json.utf8))
            Issue.record("accepted \(json)")
        } catch {
            #expect(error.statusCode == 400 && error.body.message == "Failed to decode request body.")
            #expect(error.body.detail?.hasPrefix(field) == true, "\(error.body.detail ?? "-")")
            #expect(error.body.detail?.contains("DecodingError") != true)
        }
    }

    @Test(arguments: [
        // Side and pixel caps: 8192 a side, 7680×4320 = 33 177 600 = 8192×4050 in all.
        (#"{"action":"screenshot","scaled_width":8192,"scaled_height":4050}"#, 200),
        (#"{"action":"screenshot","scaled_width":8192,"scaled_height":4051}"#, 400),
        (#"{"action":"screenshot","scaled_width":7680,"scaled_height":4320}"#, 200),
        (#"{"action":"screenshot","scaled_width":8193}"#, 400),
        (#"{"action":"screenshot","scaled_height":8193}"#, 400),
        (#"{"action":"screenshot","scaled_width":8192}"#, 200),
        (#"{"action":"screenshot","scaled_width":0,"scaled_height":-4294967296}"#, 200),
        (#"{"action":"screenshot","scaled_width":65536,"scaled_height":65536}"#, 400),
        // hold_key: 60 000 ms; negative holds 0.
        (#"{"action":"hold_key","text":"a","duration":60000}"#, 200),
        (#"{"action":"hold_key","text":"a","duration":60001}"#, 400),
        (#"{"action":"hold_key","text":"a","duration":-9223372036854775808}"#, 200),
        // scroll_amount: ±1000.
        (#"{"action":"scroll","coordinate":[0,0],"scroll_amount":1000}"#, 200),
        (#"{"action":"scroll","coordinate":[0,0],"scroll_amount":-1000,"scroll_direction":"right"}"#, 200),
        (#"{"action":"scroll","coordinate":[0,0],"scroll_amount":-1001}"#, 400),
        (#"{"action":"scroll","coordinate":[0,0],"scroll_amount":-9223372036854775808,"scroll_direction":"up"}"#, 400),
        // settle_ms: 10 000; ≤ 0 is none.
        (#"{"action":"screenshot","settle_ms":10000}"#, 200),
        (#"{"action":"screenshot","settle_ms":10001}"#, 400),
        (#"{"action":"screenshot","settle_ms":-9223372036854775808}"#, 200),
        // Coordinates are never refused, whatever their size.
        (#"{"action":"left_click_drag","coordinate":[9223372036854775807,-9223372036854775808],"start_coordinate":[-9223372036854775808]}"#, 200),
        // Numbers past Int64 are not numbers a field can hold.
        (#"{"action":"left_click","coordinate":[9223372036854775808,0]}"#, 400),
        (#"{"action":"screenshot","region":[9223372036854775807,9223372036854775807,9223372036854775807,9223372036854775807]}"#, 200),
        (#"{"action":"screenshot","region":[1,2,3]}"#, 400),
    ])
    func boundsAtTheirEdges(_ example: (String, Int)) {
        #expect(Self.outcome(example.0).status == example.1, "\(example.0)")
    }

    @Test func regionEndsSaturateAndValuesAreKept() throws {
        let action = try DesktopAction.decode(json: Array(#"{"action":"screenshot","region":[9223372036854775800,-5,100,7],"scaled_width":1,"scaled_height":-1,"settle_ms":250}"#.utf8))
        let region = try #require(action.region)
        #expect(region.x0 == 9_223_372_036_854_775_800 && region.x1 == Int.max)
        #expect(region.y0 == -5 && region.y1 == 1)
        #expect(action.declared(native: DisplayGeometry(width: 1920, height: 1080)) == DisplayGeometry(width: 1, height: 1080))
        #expect(action.settle == .milliseconds(250))
        let scroll = try DesktopAction.decode(json: Array(#"{"action":"scroll","coordinate":[1,2],"scroll_amount":-7,"scroll_direction":"up"}"#.utf8))
        #expect(scroll.scroll.dx == 0 && scroll.scroll.dy == 7, "a negative amount scrolls the other way, as the reference")
        let hold = try DesktopAction.decode(json: Array(#"{"action":"hold_key","text":"a"}"#.utf8))
        #expect(hold.hold == .milliseconds(1000))
    }

    /// Random bodies: every action, each numeric field absent or one of the numbers that
    /// broke arithmetic before; each must come back as an action or a 400, never a trap.
    /// 4000 bodies, seeded, so a failure repeats.
    @Test(.ownThreads) func randomExtremeBodiesNeverTrap() throws {
        var random = SplitMix64(seed: 24)
        let numbers = [
            "0", "1", "-1", "3", "1000", "1001", "8192", "8193", "60000", "4294967296", "65536",
            "9223372036854775807", "-9223372036854775808", "-9223372036854775807", "4611686018427387904",
        ]
        let names = DesktopActionName.allCases.map(\.rawValue) + ["wait", "zoom", ""]
        func number() -> String { numbers[Int(random.next() % UInt64(numbers.count))] }
        func maybe(_ key: String, _ value: () -> String) -> String? { random.next() % 3 == 0 ? nil : "\"\(key)\":\(value())" }
        var accepted = 0
        for _ in 0..<4000 {
            let name = names[Int(random.next() % UInt64(names.count))]
            let fields = [
                "\"action\":\"\(name)\"",
                maybe("coordinate") { "[\(number()),\(number())]" },
                maybe("start_coordinate") { "[\(number()),\(number())]" },
                maybe("text") { "\"shift\"" },
                maybe("duration", number),
                maybe("scroll_amount", number),
                maybe("scroll_direction") { ["\"up\"", "\"down\"", "\"left\"", "\"right\""][Int(random.next() % 4)] },
                maybe("scaled_width", number),
                maybe("scaled_height", number),
                maybe("region") { "[\(number()),\(number()),\(number()),\(number())]" },
                maybe("settle_ms", number),
            ].compactMap { $0 }
            let outcome = Self.outcome("{" + fields.joined(separator: ",") + "}")
            #expect(outcome.status == 200 || outcome.status == 400)
            if outcome.status == 200 { accepted += 1 }
        }
        #expect(accepted > 0, "some bodies are valid")
    }

    /// A request waiting for the desktop behind a long action leaves the queue when its task
    /// is cancelled (its client went away), without waiting for its turn; the gate then still
    /// serves the holder and those after it.
    @Test(.timeLimit(.minutes(3))) func aCancelledWaiterLeavesTheQueue() async throws {
        let gate = AsyncGate()
        let (release, releaser) = AsyncStream<Void>.makeStream()
        let (entered, enter) = AsyncStream<Void>.makeStream()
        let holder = Task {
            await gate.withGate {
                enter.yield()
                for await _ in release {}
                return "held"
            }
        }
        for await _ in entered { break }
        let waiter = Task { await gate.withGate { "ran" }.value }
        #expect(await eventually { await gate.waiting == 1 })
        waiter.cancel()
        #expect(await waiter.value == nil, "cancelled before its turn: not run")
        #expect(await gate.waiting == 0)
        releaser.finish()
        #expect(await holder.value.value == "held")
        #expect(await gate.withGate { 7 }.value == 7, "the gate is free again")
        // A task cancelled before it asks does not run either, and leaves nothing behind.
        let (hold2, holding2) = AsyncStream<Void>.makeStream()
        let (entered2, enter2) = AsyncStream<Void>.makeStream()
        let holder2 = Task {
            await gate.withGate {
                enter2.yield(); for await _ in hold2 {}
            }
        }
        for await _ in entered2 { break }
        let late = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await gate.withGate { "ran" }.value
        }
        #expect(await late.value == nil)
        holding2.finish()
        _ = await holder2.value
        #expect(await gate.waiting == 0)
    }

    /// Behind a long action at most ``AsyncGate/maxWaiting`` requests wait (each may hold a
    /// 1 MiB text to type); one more is turned away at once, without running.
    @Test(.timeLimit(.minutes(3))) func theQueueIsBounded() async throws {
        let gate = AsyncGate()
        let (release, releaser) = AsyncStream<Void>.makeStream()
        let (entered, enter) = AsyncStream<Void>.makeStream()
        let holder = Task {
            await gate.withGate {
                enter.yield()
                for await _ in release {}
            }
        }
        for await _ in entered { break }
        let waiters = (0..<AsyncGate.maxWaiting).map { i in Task { await gate.withGate { i }.value } }
        #expect(await eventually { await gate.waiting == AsyncGate.maxWaiting })
        guard case .full = await gate.withGate({ "ran" }) else {
            Issue.record("one more waiter was queued")
            return
        }
        releaser.finish()
        _ = await holder.value
        var ran = 0
        for waiter in waiters where await waiter.value != nil { ran += 1 }
        #expect(ran == AsyncGate.maxWaiting)
        #expect(await gate.waiting == 0)
    }

    /// A waiter cancelled by the holder as its last statement before leaving does not run,
    /// whichever comes first: the holder's leaving, which lets the waiter in, or the
    /// waiter's withdrawal, which runs in a task of its own. Before, the leaving mostly came
    /// first and the cancelled waiter's body ran. Twenty rounds.
    @Test(.timeLimit(.minutes(3))) func aWaiterCancelledAsTheHolderLeavesDoesNotRun() async throws {
        let gate = AsyncGate()
        for round in 0..<20 {
            let (waiters, send) = AsyncStream<Task<String?, Never>>.makeStream()
            let (entered, enter) = AsyncStream<Void>.makeStream()
            let holder = Task {
                await gate.withGate {
                    enter.yield()
                    for await waiter in waiters {
                        _ = await eventually { await gate.waiting == 1 }
                        waiter.cancel()
                        break
                    }
                }
            }
            for await _ in entered { break }
            let waiter = Task { await gate.withGate { "ran" }.value }
            send.yield(waiter)
            #expect(await waiter.value == nil, "round \(round): cancelled before its turn: not run")
            _ = await holder.value
            #expect(await gate.waiting == 0)
        }
        #expect(await gate.withGate { 7 }.value == 7, "the gate is free again")
    }
}
