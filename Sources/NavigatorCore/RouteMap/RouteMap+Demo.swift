extension RouteMap {
    /// The built-in route map of a messaging-style app, used by `navigatord` when no map is
    /// configured. It uses every route-map feature: tabs with roots, push screens with home tabs
    /// and parents (chat list -> chat -> thread), identity and typed info (int, uuid, enum, bool,
    /// optional keys), unique-in-stack, modals of each style, a guard (payment and profile
    /// editing need `authenticated`, else login), a blocking modal (incoming call), set-root
    /// (welcome) and replace (payment receipt), and URL patterns.
    public static let demo = RouteMap(
        tabs: [
            TabSpec(name: "home", root: "home"),
            TabSpec(name: "search", root: "search"),
            TabSpec(name: "chats", root: "chatList"),
            TabSpec(name: "profile", root: "myProfile"),
        ],
        initialTab: "home",
        screens: [
            "home": ScreenSpec(url: "app://home"),
            "search": ScreenSpec(info: ["query": .optional(.string)], url: "app://search"),
            "chatList": ScreenSpec(
                info: ["filter": .optional(.oneOf(["all", "unread", "groups"]))], url: "app://chats"),
            "myProfile": ScreenSpec(url: "app://me"),
            "chat": ScreenSpec(
                homeTab: "chats", parent: "chatList", identity: ["conversationId"],
                info: ["conversationId": InfoSpec(.int), "draft": .optional(.string), "highlight": .optional(.int)],
                uniqueInStack: true, url: "app://chat/{conversationId}"),
            "thread": ScreenSpec(
                homeTab: "chats", parent: "chat", identity: ["conversationId", "threadId"],
                info: ["conversationId": InfoSpec(.int), "threadId": InfoSpec(.int)],
                uniqueInStack: true, url: "app://chat/{conversationId}/thread/{threadId}"),
            "userProfile": ScreenSpec(
                homeTab: "search", parent: "search", identity: ["userId"],
                info: ["userId": InfoSpec(.uuid), "tab": .optional(.oneOf(["posts", "media", "about"]))],
                uniqueInStack: true, url: "app://user/{userId}"),
            "settings": ScreenSpec(
                homeTab: "profile", parent: "myProfile",
                info: ["section": .optional(.oneOf(["account", "privacy", "notifications"]))],
                uniqueInStack: true, url: "app://settings"),
            "notificationSettings": ScreenSpec(
                homeTab: "profile", parent: "settings", info: ["muted": .optional(.bool)],
                url: "app://settings/notifications"),
            "editProfile": ScreenSpec(
                transition: .modal(.sheet), guard: .init(condition: "authenticated", redirect: "login"),
                url: "app://me/edit"),
            "login": ScreenSpec(transition: .modal(.fullScreen), url: "app://login"),
            "payment": ScreenSpec(
                transition: .modal(.sheet), parent: "chat", identity: ["conversationId"],
                info: [
                    "conversationId": InfoSpec(.int), "amount": InfoSpec(.int),
                    "currency": InfoSpec(.oneOf(["EUR", "USD", "GBP"])),
                ],
                guard: .init(condition: "authenticated", redirect: "login"),
                url: "app://chat/{conversationId}/pay"),
            "paymentReceipt": ScreenSpec(
                transition: .replace, identity: ["receiptId"],
                info: ["receiptId": InfoSpec(.string)], url: "app://receipt/{receiptId}"),
            "mediaViewer": ScreenSpec(
                transition: .modal(.overCurrent), identity: ["mediaId"], info: ["mediaId": InfoSpec(.string)],
                url: "app://media/{mediaId}"),
            "reactions": ScreenSpec(
                transition: .modal(.popover), parent: "chat", identity: ["conversationId"],
                info: ["conversationId": InfoSpec(.int)]),
            "incomingCall": ScreenSpec(
                transition: .modal(.fullScreen), identity: ["callId"],
                info: ["callId": InfoSpec(.uuid), "caller": .optional(.string)], blocking: true,
                url: "app://call/{callId}"),
            "welcome": ScreenSpec(transition: .setRoot, url: "app://welcome"),
        ]
    )
}
