import AgentTestSupport
import Foundation
import Testing

@testable import Desktop

/// Correctness mends, against a real Xvnc changed by other X clients: a
/// screenshot shows the screen as it is when asked (not the framebuffer the agent's VNC
/// connection last received), `cursor_position` reports where the X pointer is (not where
/// the agent last put it), and `GET /api/v0/desktop` reports the desktop.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct DesktopFreshnessTests {
    /// 20 rounds of `xsetroot -solid <colour>` then a screenshot, each round a colour unlike
    /// the last: every screenshot shows the colour just set. The kinds of capture take
    /// turns: scaled to a declared size, a region at native resolution, the whole native
    /// screen. (Before the fix the image lagged one change behind.)
    @Test func everyScreenshotShowsTheColourJustSet() async throws {
        try await DesktopHarness.with { desktop in
            // The desktop and the agent's VNC connection are up before the first round.
            #expect(try await desktop.action(#"{"action":"screenshot","scaled_width":64,"scaled_height":36}"#).status == 200)
            for round in 0..<20 {
                let rgb = [(round * 53 + 17) % 256, round % 2 == 0 ? 255 : 0, (round * 97 + 40) % 256]
                let hex = "#" + rgb.map { String(format: "%02x", $0) }.joined()
                _ = try await desktop.x(["xsetroot", "-solid", hex])
                let body: String
                let spot: (x: Int, y: Int)
                switch round % 3 {
                case 0:
                    body = #"{"action":"screenshot","scaled_width":64,"scaled_height":36}"#
                    spot = (5, 5)
                case 1:
                    body = #"{"action":"screenshot","region":[100,100,40,30]}"#
                    spot = (39, 29)
                default:
                    body = #"{"action":"screenshot"}"#
                    spot = (10, 10)
                }
                let shot = try await desktop.action(body)
                #expect(shot.status == 200, "round \(round): \(shot.body)")
                let pixel = await DesktopHarness.pixel(shot.body["screenshot_data"] as? String ?? "", x: spot.x, y: spot.y)
                #expect(pixel.rgb == rgb, "round \(round): \(body) after xsetroot -solid \(hex)")
            }
        }
    }

    /// The pointer moved by another X client (`xdotool mousemove`) is read back exactly, at
    /// 1:1 and in a declared size, and again after it moved once more. A button pressed
    /// without a coordinate is pressed where the pointer is, and does not move it (RFB
    /// button events carry a position: before the fix, the agent's last one).
    @Test func cursorPositionReportsWhereTheXPointerIs() async throws {
        try await DesktopHarness.with { desktop in
            let native = DisplayGeometry(width: 1920, height: 1080)
            // The agent's VNC connection exists (and has put the pointer somewhere) first.
            #expect(try await desktop.action(#"{"action":"mouse_move","coordinate":[960,540]}"#).status == 200)
            for (x, y) in [(300, 200), (1500, 900), (0, 1079)] {
                _ = try await desktop.x(["xdotool", "mousemove", "\(x)", "\(y)"])
                let plain = try await desktop.action(#"{"action":"cursor_position"}"#)
                #expect(plain.status == 200 && plain.body["output"] as? String == "x=\(x),y=\(y)", "\(plain.body)")
                for declared in [DisplayGeometry(width: 1280, height: 720), DisplayGeometry(width: 1366, height: 768)] {
                    let expected = native.map(x: x, y: y, to: declared)
                    let scaled = try await desktop.action(
                        #"{"action":"cursor_position","scaled_width":\#(declared.width),"scaled_height":\#(declared.height)}"#)
                    #expect(scaled.body["output"] as? String == "x=\(expected.x),y=\(expected.y)", "(\(x),\(y)) in \(declared)")
                }
            }
            _ = try await desktop.x(["xdotool", "mousemove", "300", "200"])
            #expect(try await desktop.action(#"{"action":"left_mouse_down"}"#).status == 200)
            #expect(try await desktop.action(#"{"action":"left_mouse_up"}"#).status == 200)
            #expect(try await desktop.x(["xdotool", "getmouselocation"]).hasPrefix("x:300 y:200 "))
        }
    }

    /// `GET /api/v0/desktop`: 200 always; `running` false before the desktop starts and
    /// after it stops; while it runs, its display and native size, and the declared size
    /// once an action declared one.
    @Test func statusReportsTheDesktop() async throws {
        try await DesktopHarness.with { desktop in
            func status() async throws -> (status: Int, body: [String: Any]) {
                let response = try await desktop.client.request("GET", "/api/v0/desktop")
                return (response.status, (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:])
            }
            let idle = try await status()
            #expect(idle.status == 200 && idle.body["running"] as? Bool == false && idle.body.count == 1, "\(idle.body)")

            #expect(try await desktop.action(#"{"action":"cursor_position"}"#).status == 200)
            let display = try await desktop.module.supervisor.ensureStarted().display
            let running = try await status()
            #expect(running.status == 200 && running.body["running"] as? Bool == true, "\(running.body)")
            #expect(running.body["display"] as? String == ":\(display)")
            #expect(running.body["width"] as? Int == 1920 && running.body["height"] as? Int == 1080)
            #expect(running.body["declared_width"] == nil && running.body["declared_height"] == nil)

            #expect(try await desktop.action(#"{"action":"screenshot","scaled_width":1280,"scaled_height":720}"#).status == 200)
            let declared = try await status()
            #expect(declared.body["declared_width"] as? Int == 1280 && declared.body["declared_height"] as? Int == 720, "\(declared.body)")

            await desktop.module.supervisor.close()
            let stopped = try await status()
            #expect(stopped.status == 200 && stopped.body["running"] as? Bool == false, "\(stopped.body)")
        }
    }

    /// `scroll` without `scroll_direction` (or with `null`) scrolls down
    /// (`scroll_amount` default 3: X buttons 5); an empty direction is invalid, as the
    /// reference (a Go `*string`: only a missing one defaults).
    @Test func scrollWithoutADirectionScrollsDown() async throws {
        try await DesktopHarness.with { desktop in
            try await desktop.watchingXEvents("button", seconds: 30) { log in
                func buttons() -> [String] {
                    let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                    var pressed: [String] = []
                    var inPress = false
                    for line in text.split(separator: "\n") {
                        if line.hasPrefix("ButtonPress") { inPress = true }
                        if inPress, let range = line.range(of: #"button \d+"#, options: .regularExpression) {
                            pressed.append(String(line[range]))
                            inPress = false
                        }
                    }
                    return pressed
                }
                let scroll = try await desktop.action(#"{"action":"scroll","coordinate":[200,150]}"#)
                #expect(scroll.status == 200 && scroll.body["output"] as? String == "scroll action performed")
                #expect(await eventually { buttons().count >= 3 })
                #expect(buttons() == ["button 5", "button 5", "button 5"])
                let null = try await desktop.action(#"{"action":"scroll","coordinate":[200,150],"scroll_direction":null,"scroll_amount":1}"#)
                #expect(null.status == 200)
                #expect(await eventually { buttons().count >= 4 })
                #expect(buttons().last == "button 5")
                let empty = try await desktop.action(#"{"action":"scroll","coordinate":[200,150],"scroll_direction":""}"#)
                #expect(empty.status == 400 && empty.body["message"] as? String == "Invalid scroll direction: ")
            }
        }
    }
}
