import AgentTestSupport
import Foundation
import Testing

@testable import Desktop

/// Computer-use actions against a real Xvnc, checked with X's own tools (xdotool, xev,
/// xsetroot) and a PNG decoder independent of the agent's.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct DesktopActionTests {
    @Test func screenshotsShowWhatIsOnTheScreenAtTheDeclaredSize() async throws {
        try await DesktopHarness.with { desktop in
            _ = try await desktop.x(["xsetroot", "-solid", "#ff8000"])
            // Native: 1920×1080, echoed.
            let native = try await desktop.action(#"{"action":"screenshot","settle_ms":200}"#)
            #expect(native.status == 200 && native.body["output"] as? String == "screenshot")
            #expect(native.body["screenshot_width"] as? Int == 1920 && native.body["screenshot_height"] as? Int == 1080)
            let data = try #require(native.body["screenshot_data"] as? String)
            let pixel = await DesktopHarness.pixel(data, x: 1000, y: 500)
            #expect(pixel.width == 1920 && pixel.height == 1080 && pixel.rgb == [255, 128, 0])

            // Declared 320×180: the image is scaled to it.
            let small = try await desktop.action(#"{"action":"screenshot","scaled_width":320,"scaled_height":180}"#)
            #expect(small.body["screenshot_width"] as? Int == 320 && small.body["screenshot_height"] as? Int == 180)
            let smallPixel = await DesktopHarness.pixel(small.body["screenshot_data"] as? String ?? "", x: 10, y: 10)
            #expect(smallPixel.width == 320 && smallPixel.rgb == [255, 128, 0])

            // A region (declared coordinates) comes back at native resolution.
            let region = try await desktop.action(
                #"{"action":"screenshot","scaled_width":1280,"scaled_height":720,"region":[0,0,100,50]}"#)
            #expect(region.body["screenshot_width"] as? Int == 150 && region.body["screenshot_height"] as? Int == 75)
            let regionPixel = await DesktopHarness.pixel(region.body["screenshot_data"] as? String ?? "", x: 149, y: 74)
            #expect(regionPixel.rgb == [255, 128, 0])
            #expect(try await desktop.action(#"{"action":"screenshot","region":[0,0,0,5]}"#).status == 400)
        }
    }

    @Test func clicksMovesAndCursorPositionInDeclaredCoordinates() async throws {
        try await DesktopHarness.with { desktop in
            let click = try await desktop.action(#"{"action":"left_click","coordinate":[100,200]}"#)
            #expect(click.status == 200 && click.body["output"] as? String == "left_click action performed")
            #expect(try await desktop.x(["xdotool", "getmouselocation"]).hasPrefix("x:100 y:200 "))

            let moved = try await desktop.action(#"{"action":"mouse_move","coordinate":[640,360],"scaled_width":1280,"scaled_height":720}"#)
            #expect(moved.status == 200)
            #expect(try await desktop.x(["xdotool", "getmouselocation"]).hasPrefix("x:960 y:540 "))
            let position = try await desktop.action(#"{"action":"cursor_position","scaled_width":1280,"scaled_height":720}"#)
            #expect(position.body["output"] as? String == "x=640,y=360")
            #expect(try await desktop.action(#"{"action":"cursor_position"}"#).body["output"] as? String == "x=960,y=540")

            for action in ["right_click", "middle_click", "double_click", "triple_click"] {
                let answer = try await desktop.action(#"{"action":"\#(action)","coordinate":[10,10]}"#)
                #expect(answer.status == 200 && answer.body["output"] as? String == "\(action) action performed")
            }
            let drag = try await desktop.action(#"{"action":"left_click_drag","start_coordinate":[5,5],"coordinate":[300,301]}"#)
            #expect(drag.status == 200)
            #expect(try await desktop.x(["xdotool", "getmouselocation"]).hasPrefix("x:300 y:301 "))
            #expect(try await desktop.action(#"{"action":"left_mouse_down"}"#).status == 200)
            #expect(try await desktop.action(#"{"action":"left_mouse_up"}"#).status == 200)
            let scroll = try await desktop.action(#"{"action":"scroll","coordinate":[500,400],"scroll_direction":"up","scroll_amount":2}"#)
            #expect(scroll.body["output"] as? String == "scroll action performed")
            #expect(try await desktop.x(["xdotool", "getmouselocation"]).hasPrefix("x:500 y:400 "))
        }
    }

    @Test func typingAndKeysLandInAnXClient() async throws {
        try await DesktopHarness.with { desktop in
            let display = try await desktop.module.supervisor.ensureStarted().display
            // xev's window at the top left; with no window manager, keys go where the pointer is,
            // so typing waits until the window is mapped (a window is found by name before).
            let log = NSTemporaryDirectory() + "xev-\(UUID().uuidString.prefix(8)).log"
            defer { try? FileManager.default.removeItem(atPath: log) }
            let xev = Task {
                await DesktopHarness.run(["sh", "-c", "exec timeout 60 xev -geometry 400x300+0+0 -event keyboard > \(log)"], environment: ["DISPLAY": ":\(display)"])
            }
            defer { xev.cancel() }
            #expect(await eventually { (try? await desktop.x(["xdotool", "search", "--onlyvisible", "--name", "Event Tester"]))?.isEmpty == false })
            #expect(try await desktop.action(#"{"action":"mouse_move","coordinate":[200,150]}"#).status == 200)
            #expect(try await desktop.action(#"{"action":"type","text":"hi A"}"#).body["output"] as? String == "type action performed")
            #expect(try await desktop.action(#"{"action":"key","text":"ctrl+Return"}"#).status == 200)
            #expect(try await desktop.action(#"{"action":"hold_key","text":"shift","duration":50}"#).body["output"] as? String == "hold_key action performed")
            func pressed() -> [String] {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                var keys: [String] = []
                var inPress = false
                for line in text.split(separator: "\n") {
                    if line.hasPrefix("KeyPress") { inPress = true }
                    if line.hasPrefix("KeyRelease") { inPress = false }
                    if inPress, let range = line.range(of: #"keysym 0x[0-9a-f]+, (\w+)\)"#, options: .regularExpression) {
                        keys.append(String(line[range].split(separator: " ").last!.dropLast()))
                        inPress = false
                    }
                }
                return keys
            }
            // Xvnc may add a Caps_Lock press of its own to produce an upper-case letter.
            func typed() -> [String] { pressed().filter { $0 != "Caps_Lock" } }
            #expect(await eventually { typed().count >= 7 })
            #expect(typed().prefix(7) == ["h", "i", "space", "A", "Control_L", "Return", "Shift_L"][...])
        }
    }

    @Test func errorsAsTheReference() async throws {
        try await DesktopHarness.with { desktop in
            let cases: [(String, Int, String)] = [
                (#"{"action":"explode"}"#, 400, "Unknown action: explode"),
                (#"{"action":"wait"}"#, 400, "Unknown action: wait"),
                (#"{}"#, 400, "Unknown action: "),
                (#"{"action":"left_click"}"#, 400, #"Missing "coordinate" for left_click action."#),
                (#"{"action":"mouse_move"}"#, 400, #"Missing "coordinate" for mouse_move action."#),
                (#"{"action":"scroll"}"#, 400, #"Missing "coordinate" for scroll action."#),
                (#"{"action":"type"}"#, 400, #"Missing "text" for type action."#),
                (#"{"action":"hold_key"}"#, 400, #"Missing "text" for hold_key action."#),
                (#"{"action":"key"}"#, 400, #"Missing "text" for key action."#),
                (#"{"action":"left_click_drag","coordinate":[1,2]}"#, 400, #"Missing "coordinate" or "start_coordinate" for left_click_drag."#),
                (#"{"action":"scroll","coordinate":[1,2],"scroll_direction":"sideways"}"#, 400, "Invalid scroll direction: sideways"),
                (#"{"action":"left_click","coordinate":[1.5,2]}"#, 400, "Failed to decode request body."),
                (#"not json"#, 400, "Failed to decode request body."),
                (#"{"action":"key","text":"ctrl+nosuchkey"}"#, 500, "Key press failed."),
            ]
            for (body, status, message) in cases {
                let answer = try await desktop.action(body)
                #expect(answer.status == status, "\(body)")
                #expect(answer.body["message"] as? String == message, "\(body)")
            }
        }
    }

    /// `settle_ms`: the action returns once the screen stopped changing; the screenshot then
    /// shows the animation's last frame.
    @Test func settleWaitsForTheScreenToStopChanging() async throws {
        try await DesktopHarness.with { desktop in
            let display = try await desktop.module.supervisor.ensureStarted().display
            _ = try await desktop.action(#"{"action":"screenshot"}"#)
            let started = NSTemporaryDirectory() + "animation-\(UUID().uuidString.prefix(8))"
            defer { unlink(started) }
            let animation = Task {
                await DesktopHarness.run(
                    ["sh", "-c", "xsetroot -solid '#000080'; touch \(started); for i in 1 2 3 4 5; do sleep 0.05; xsetroot -solid '#008000'; sleep 0.05; xsetroot -solid '#000080'; done; xsetroot -solid '#00ff00'"],
                    environment: ["DISPLAY": ":\(display)"])
            }
            // The animation runs (its first frame is drawn) before the action starts; 1.5 s of
            // quiet is longer than a loaded host's gap between two `xsetroot` runs.
            #expect(await eventually(timeout: .seconds(30)) { FileManager.default.fileExists(atPath: started) })
            let settled = try await desktop.action(#"{"action":"screenshot","settle_ms":1500,"scaled_width":64,"scaled_height":36}"#)
            _ = await animation.value
            #expect((settled.body["settle_waited_ms"] as? Int ?? 0) >= 1500)
            let pixel = await DesktopHarness.pixel(settled.body["screenshot_data"] as? String ?? "", x: 5, y: 5)
            #expect(pixel.rgb == [0, 255, 0], "the last frame, not one in the middle of the animation")
        }
    }
}
