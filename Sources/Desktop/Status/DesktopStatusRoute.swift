import AgentHTTP
import Hummingbird

/// `GET /api/v0/desktop`: the desktop's status, always 200 (``DesktopStatus``). It starts
/// nothing and is no activity (it does not keep an idle desktop alive). The size is read
/// from the X server (a viewer may have resized the screen), else the size it started with.
struct DesktopStatusRoute: Sendable {
    let supervisor: DesktopSupervisor
    /// Concurrent status requests share one X read.
    let probe = ScreenSizeProbe()

    func handle(_ request: Request, _ context: AgentRequestContext) async -> Response {
        JSONResponse.make(await status())
    }

    func status() async -> DesktopStatus {
        guard let found = await supervisor.status() else { return DesktopStatus(running: false) }
        let (info, declared) = found
        var size = DisplayGeometry(width: info.width, height: info.height)
        let display = info.display
        if display >= 0, let screen = await probe.size(display: display) { size = screen }
        return DesktopStatus(
            running: true, display: display >= 0 ? ":\(display)" : nil, width: size.width, height: size.height,
            declaredWidth: declared?.width, declaredHeight: declared?.height)
    }
}
