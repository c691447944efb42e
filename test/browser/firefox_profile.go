package browser

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// firefoxPrefs go into the fresh profile's user.js. Most keep Firefox off
// the network: the page's requests are the only ones a test should see or
// wait for, and the machines the tests run on may have no way out, where
// a lookup that hangs slows every start.
var firefoxPrefs = map[string]any{
	// 0: Firefox picks a free port and writes it to MarionetteActivePort
	// in the profile. A port chosen here and passed in could be taken by
	// someone else before Firefox binds it.
	"marionette.port": 0,

	// A blank first window: no welcome, what's-new or privacy-notice tab
	// loading in the background, no default-browser question.
	"browser.startup.page":                             0,
	"browser.startup.homepage":                         "about:blank",
	"browser.startup.homepage_override.mstone":         "ignore",
	"startup.homepage_welcome_url":                     "about:blank",
	"startup.homepage_welcome_url.additional":          "",
	"browser.aboutwelcome.enabled":                     false,
	"browser.newtabpage.enabled":                       false,
	"browser.shell.checkDefaultBrowser":                false,
	"datareporting.policy.firstRunURL":                 "",
	"browser.sessionstore.resume_from_crash":           false,
	"browser.tabs.warnOnClose":                         false,
	"toolkit.startup.max_resumed_crashes":              -1,
	"browser.newtabpage.activity-stream.showSponsored": false,

	// Updates of Firefox, its add-ons, plugins and blocklists.
	"app.update.disabledForTesting":      true,
	"app.update.auto":                    false,
	"extensions.update.enabled":          false,
	"extensions.getAddons.cache.enabled": false,
	"extensions.systemAddon.update.url":  "",
	"extensions.blocklist.enabled":       false,
	"media.gmp-manager.url":              "",
	"media.gmp-manager.updateEnabled":    false,
	"media.gmp-gmpopenh264.enabled":      false,
	"media.gmp-widevinecdm.enabled":      false,

	// Telemetry, studies and experiments.
	"toolkit.telemetry.enabled":                   false,
	"toolkit.telemetry.unified":                   false,
	"toolkit.telemetry.archive.enabled":           false,
	"toolkit.telemetry.server":                    "",
	"datareporting.healthreport.uploadEnabled":    false,
	"datareporting.policy.dataSubmissionEnabled":  false,
	"app.normandy.enabled":                        false,
	"app.shield.optoutstudies.enabled":            false,
	"messaging-system.rsexperimentloader.enabled": false,
	"browser.discovery.enabled":                   false,

	// Web Push's connection to Mozilla's server.
	"dom.push.connection.enabled": false,

	// Checks of the network itself.
	"network.captive-portal-service.enabled": false,
	"network.connectivity-service.enabled":   false,
	"network.trr.mode":                       5, // no DNS over HTTPS
	"browser.region.network.url":             "",
	"geo.provider.network.url":               "",

	// Safe Browsing's lists.
	"browser.safebrowsing.malware.enabled":     false,
	"browser.safebrowsing.phishing.enabled":    false,
	"browser.safebrowsing.downloads.enabled":   false,
	"browser.safebrowsing.blockedURIs.enabled": false,
	"browser.safebrowsing.passwords.enabled":   false,

	// Remote Settings, which Firefox polls for many of its lists: a
	// server that answers nothing, without a connection. A release build
	// takes another server only with MOZ_REMOTE_SETTINGS_DEVTOOLS set
	// (startFirefox does).
	"services.settings.server": "data:,no-remote-settings",

	// Guesses at what the page will load next.
	"network.dns.disablePrefetch":               true,
	"network.prefetch-next":                     false,
	"network.predictor.enabled":                 false,
	"network.http.speculative-parallel-limit":   0,
	"browser.urlbar.speculativeConnect.enabled": false,

	// One CSS pixel is one screenshot pixel, as in Chromium's driver.
	"layout.css.devPixelsPerPx": "1.0",
}

// writeProfile makes dir a fresh profile: Firefox started on a directory
// that does not exist waits forever.
func writeProfile(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("// Written by cilium-go's test/browser for a headless test run.\n")
	for _, name := range slices.Sorted(maps.Keys(firefoxPrefs)) {
		// A JSON string, number or boolean is a JavaScript literal too.
		v, err := json.Marshal(firefoxPrefs[name])
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "user_pref(%q, %s);\n", name, v)
	}
	return os.WriteFile(filepath.Join(dir, "user.js"), []byte(b.String()), 0o600)
}

// activePortFile is where Firefox writes Marionette's port when
// marionette.port is 0.
const activePortFile = "MarionetteActivePort"

// pollInterval is how often Launch looks for activePortFile.
const pollInterval = 20 * time.Millisecond
