/*
 * nboracle-due-dates: the due date of each nbgrader assignment in JupyterLab's Assignment List,
 * and which of a student's submissions came after it.
 *
 * Plain JavaScript with no build step and no import: JupyterLab loads this file as a federated
 * extension (it defines window._JUPYTERLAB["nboracle-due-dates"] with init and get) and activates
 * the plugin below. The plugin reads nbgrader's own listing (GET <base>/assignments?course_id=C),
 * which nboracle.grader.nbgrader_ext.DueDateExchangeList fills with `due_utc` per assignment and
 * `after_due` per submission, and writes them beside the rows nbgrader's panel drew, the date in the
 * course's time zone (`due_zone`) and the time left exact to the minute in the last two days. A course
 * with a message catalog released its phrases translated (`due_words`, English phrase -> its own, and
 * `due_language`): they are shown instead, the date written the language's way by the browser (Intl),
 * and the words nbgrader's panel writes itself (its headings, the Fetch, Submit and Validate buttons
 * of that course's rows, the Validation Results dialog) are shown in that language too: the same
 * buttons doing the same thing, only their text changed (nbgrader 0.9.6's panel has no translation hook).
 */
(function () {
  "use strict";

  var NAME = "nboracle-due-dates";
  var MARK = "nboracle-due";
  var LISTS = ["released_assignments_list", "fetched_assignments_list", "submitted_assignments_list"];
  var DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  // A phrase in the course's words (`words`: English -> translation, from the release), its {fields} filled.
  function say(words, english, fields) {
    var text = words && typeof words[english] === "string" ? words[english] : english;
    return text.replace(/\{(\w+)\}/g, function (whole, name) {
      return fields && name in fields ? String(fields[name]) : whole;
    });
  }

  // The date in the language's own way ("T5, 17/12/2026, 17:00"), or null: English, or unknown to the browser.
  function localDate(due, zone, language) {
    if (!language || language === "en" || !/^[a-z]{2,3}(-[A-Za-z]{2,4})?$/.test(language)) {
      return null;
    }
    try {
      return new Intl.DateTimeFormat(language, {
        timeZone: zone || "UTC", weekday: "short", day: "2-digit", month: "2-digit", year: "numeric",
        hour: "2-digit", minute: "2-digit", hourCycle: "h23"
      }).format(due);
    } catch (error) {
      return null;
    }
  }

  function pageConfig() {
    var element = document.getElementById("jupyter-config-data");
    try {
      return JSON.parse(element ? element.textContent : "{}");
    } catch (error) {
      return {};
    }
  }

  function two(n) {
    return (n < 10 ? "0" : "") + n;
  }

  // The due date's wall clock in the course's time zone (`due_zone`, an IANA name the instructor's
  // c.NbGraderAPI.timezone set): {day, date, month, year, hour, minute, offset} or null when the
  // browser does not know the zone (then UTC is shown, and said).
  function wallClock(due, zone) {
    if (!zone || zone === "UTC") {
      return null;
    }
    try {
      var parts = {};
      new Intl.DateTimeFormat("en-GB", {
        timeZone: zone, weekday: "short", day: "2-digit", month: "short", year: "numeric",
        hour: "2-digit", minute: "2-digit", hourCycle: "h23"
      }).formatToParts(due).forEach(function (p) { parts[p.type] = p.value; });
      var asUtc = Date.UTC(+parts.year, MONTHS.indexOf(parts.month), +parts.day, +parts.hour, +parts.minute);
      var minutes = Math.round((asUtc - Math.floor(due.getTime() / 60000) * 60000) / 60000);
      var sign = minutes < 0 ? "-" : "+";
      var offset = "UTC" + sign + two(Math.floor(Math.abs(minutes) / 60)) + ":" + two(Math.abs(minutes) % 60);
      return { text: parts.weekday + " " + parts.day + " " + parts.month + " " + parts.year + ", " +
        parts.hour + ":" + parts.minute + " " + zone + " (" + offset + ")", zone: zone + " (" + offset + ")" };
    } catch (error) {
      return null;
    }
  }

  // How long is left, exact to the minute in the last two days: "in 3 days", "in 1 h 11 min",
  // "in 11 min", "in less than a minute", "passed".
  function left(due, now, words) {
    var minutes = Math.floor((due.getTime() - now) / 60000);
    if (due.getTime() <= now) {
      return say(words, "passed");
    }
    if (minutes < 1) {
      return say(words, "in less than a minute");
    }
    if (minutes < 60) {
      return say(words, "in {minutes} min", { minutes: minutes });
    }
    if (minutes < 48 * 60) {
      return say(words, "in {hours} h {minutes} min", { hours: Math.floor(minutes / 60), minutes: two(minutes % 60) });
    }
    return say(words, "in {days} days", { days: Math.floor(minutes / (24 * 60)) });
  }

  // "Due Thu 17 Dec 2026, 17:00 Asia/Ho_Chi_Minh (UTC+07:00) (in 1 h 11 min)": the course's zone;
  // "Due Thu 17 Dec 2026, 10:00 UTC (in 13 days)" in a course on UTC (or an older release)
  // In a course with a catalog (`words`, `language`): "Hạn nộp T5, 17/12/2026, 17:00 Asia/Ho_Chi_Minh (còn 13 ngày)"
  function dueText(iso, zone, now, words, language) {
    var due = new Date(iso);
    if (isNaN(due.getTime())) {
      return "";
    }
    var there = wallClock(due, zone);
    var own = words ? localDate(due, there ? zone : "UTC", language) : null;
    var when = own ? own + " " + (there ? there.zone : "UTC") : there ? there.text : DAYS[due.getUTCDay()] + " " +
      two(due.getUTCDate()) + " " + MONTHS[due.getUTCMonth()] + " " + due.getUTCFullYear() + ", " +
      two(due.getUTCHours()) + ":" + two(due.getUTCMinutes()) + " UTC";
    return say(words, "Due {when}", { when: when }) + " (" + left(due, now, words) + ")";
  }

  function wordsOf(info) {
    var words = info && info.due_words;
    return words && typeof words === "object" && !Array.isArray(words) ? words : null;
  }

  function label(text, extra) {
    var span = document.createElement("span");
    span.className = MARK + (extra ? " " + extra : "");
    span.textContent = text ? " \u00b7 " + text : "";
    span.style.opacity = text ? "0.8" : "";
    return span;
  }

  // the top-level rows of the three lists (each an assignment; nested rows are notebooks or submissions)
  function rows() {
    var found = [];
    LISTS.forEach(function (id) {
      var list = document.getElementById(id);
      if (!list) {
        return;
      }
      Array.prototype.forEach.call(list.children, function (row) {
        if (row.classList.contains("list_item") && row.querySelector(".item_name")) {
          found.push({ list: id, row: row });
        }
      });
    });
    return found;
  }

  function unmarked() {
    return rows().filter(function (r) {
      return !r.row.querySelector(":scope > div > .item_name > ." + MARK);
    });
  }

  function nameOf(row) {
    var name = row.querySelector(":scope > div > .item_name");
    var first = name && name.firstChild;
    return first ? (first.textContent || "").trim() : "";
  }

  function courseOf(row) {
    var course = row.querySelector(":scope > div > .item_course");
    return course ? (course.textContent || "").trim() : "";
  }

  function listing(course) {
    var config = pageConfig();
    var base = config.baseUrl || "/";
    var headers = {};
    if (config.token) {
      headers.Authorization = "token " + config.token;
    }
    return fetch(base + "assignments?course_id=" + encodeURIComponent(course), {
      credentials: "same-origin",
      headers: headers
    }).then(function (reply) {
      return reply.ok ? reply.json() : { success: false };
    }).then(function (body) {
      return body && body.success && Array.isArray(body.value) ? body.value : [];
    }).catch(function () {
      return [];
    });
  }

  function annotate(targets, infos) {
    var now = Date.now();
    var byKey = {};
    infos.forEach(function (info) {
      var key = info.status + "\u0000" + info.course_id + "\u0000" + info.assignment_id;
      byKey[key] = info;
    });
    targets.forEach(function (target) {
      var row = target.row;
      var status = target.list.split("_")[0];
      var info = byKey[status + "\u0000" + courseOf(row) + "\u0000" + nameOf(row)];
      var name = row.querySelector(":scope > div > .item_name");
      if (!name || name.querySelector(":scope > ." + MARK)) {
        return;
      }
      var due = info && typeof info.due_utc === "string" ? info.due_utc : "";
      var zone = info && typeof info.due_zone === "string" ? info.due_zone : "";
      var words = wordsOf(info);
      var language = info && typeof info.due_language === "string" ? info.due_language : "";
      var span = label(due ? dueText(due, zone, now, words, language) : "");
      if (due) {  // the countdown moves on (tick below)
        span.setAttribute("data-due", due);
        span.setAttribute("data-zone", zone);
        span.setAttribute("data-words", words ? JSON.stringify(words) : "");
        span.setAttribute("data-language", language);
      }
      name.appendChild(span);
      if (status !== "submitted" || !info || !Array.isArray(info.submissions)) {
        return;
      }
      // one nested row per submission, in the listing's order (oldest first)
      var nested = row.querySelectorAll(":scope > .assignment-notebooks > .nested_list_item, " +
        ":scope > .assignment-notebooks > .list_item");
      var submissionRows = Array.prototype.filter.call(nested, function (r) {
        return r.querySelector(".item_name");
      });
      if (submissionRows.length !== info.submissions.length) {
        return;
      }
      submissionRows.forEach(function (r, i) {
        var cell = r.querySelector(".item_name");
        if (info.submissions[i].after_due === true && !cell.querySelector("." + MARK)) {
          cell.appendChild(label(say(words, "after the due date"), MARK + "-after"));
        }
      });
    });
  }

  // ---- nbgrader's own words in the course's language

  var wordsByCourse = {};  // course id -> {words, language}, from the listings the panel's rows came from

  // `text` in the course's words when, trimmed, it is one of the phrases they translate (its spaces kept), else null
  function translated(text, words) {
    if (!words || typeof text !== "string") {
      return null;
    }
    var trimmed = text.trim();
    if (!trimmed || !Object.prototype.hasOwnProperty.call(words, trimmed) || typeof words[trimmed] !== "string") {
      return null;
    }
    var at = text.indexOf(trimmed);
    return text.slice(0, at) + words[trimmed] + text.slice(at + trimmed.length);
  }

  // the text nodes of `element` and of its descendants that are one of the phrases: written in the course's words
  function relabel(element, words) {
    if (!element || !words) {
      return;
    }
    var walker = document.createTreeWalker(element, 4 /* NodeFilter.SHOW_TEXT */);
    var nodes = [];
    for (var node = walker.nextNode(); node; node = walker.nextNode()) {
      nodes.push(node);
    }
    nodes.forEach(function (n) {
      var said = translated(n.nodeValue, words);
      if (said !== null && said !== n.nodeValue) {
        n.nodeValue = said;
      }
    });
  }

  // The words of the panel as a whole (its headings, what an empty list says): those of the courses in it
  // when every course listed has words, all of one language; else null (English).
  function panelWords() {
    var found = null;
    var courses = Object.keys(wordsByCourse);
    for (var i = 0; i < courses.length; i++) {
      var entry = wordsByCourse[courses[i]];
      if (!entry.words || (found && found.language !== entry.language)) {
        return null;
      }
      found = found || entry;
    }
    return found ? found.words : null;
  }

  function relabelPanel() {
    var released = document.getElementById("released_assignments_list");
    var group = released && released.closest(".panel-group");
    var shared = panelWords();
    if (group && shared) {  // the panel's line above the lists, its headings, what an empty list says
      relabel(group.parentElement || group, shared);
    }
    rows().forEach(function (r) {  // each row's buttons and notes in its own course's words
      var entry = wordsByCourse[courseOf(r.row)];
      if (entry && entry.words) {
        Array.prototype.forEach.call(r.row.querySelectorAll("button, a, span"), function (element) {
          if (!element.classList.contains(MARK)) {
            relabel(element, entry.words);
          }
        });
      }
    });
    Array.prototype.forEach.call(document.querySelectorAll(".jp-Dialog"), function (dialog) {
      var title = dialog.querySelector(".jp-Dialog-header");
      var validation = title && ["Validation Results", translated("Validation Results", shared)]
        .indexOf((title.textContent || "").trim()) >= 0;
      if (validation && shared) {  // the results of Validate: the course's words around the tests' own messages
        relabel(title, shared);
        Array.prototype.forEach.call(dialog.querySelectorAll(".jp-Dialog-body p"), function (p) {
          relabel(p, shared);
        });
      }
    });
  }

  function remember(infos) {
    infos.forEach(function (info) {
      if (info && typeof info.course_id === "string") {
        var words = wordsOf(info);
        var language = typeof info.due_language === "string" ? info.due_language : "";
        var known = wordsByCourse[info.course_id];
        if (!known || (!known.words && words)) {
          wordsByCourse[info.course_id] = { words: words, language: language };
        }
      }
    });
  }

  var running = false;
  var again = false;

  function refresh() {
    if (running) {
      again = true;
      return;
    }
    relabelPanel();
    var targets = unmarked();
    if (!targets.length) {
      return;
    }
    running = true;
    var courses = [];
    targets.forEach(function (t) {
      var course = courseOf(t.row);
      if (course && courses.indexOf(course) < 0) {
        courses.push(course);
      }
    });
    Promise.all(courses.map(listing)).then(function (lists) {
      var infos = [].concat.apply([], lists);
      remember(infos);
      annotate(targets, infos);
      relabelPanel();
    }).finally(function () {
      running = false;
      if (again) {
        again = false;
        schedule();
      }
    });
  }

  var timer = null;

  function schedule() {
    if (timer !== null) {
      clearTimeout(timer);
    }
    timer = setTimeout(function () {
      timer = null;
      refresh();
    }, 250);
  }

  // every label's countdown again, each half minute: "(in 11 min)" stays true while the list is open
  function tick() {
    var now = Date.now();
    Array.prototype.forEach.call(document.querySelectorAll("." + MARK + "[data-due]"), function (span) {
      var words = null;
      try {
        words = JSON.parse(span.getAttribute("data-words") || "null");
      } catch (error) {
        words = null;
      }
      var text = dueText(span.getAttribute("data-due"), span.getAttribute("data-zone"), now, words,
        span.getAttribute("data-language") || "");
      span.textContent = text ? " \u00b7 " + text : "";
    });
  }

  var plugin = {
    id: NAME + ":plugin",
    description: "Shows each assignment's due date in nbgrader's Assignment List.",
    autoStart: true,
    requires: [],
    activate: function () {
      new MutationObserver(function (mutations) {
        var dialogs = Object.keys(wordsByCourse).length > 0;  // a Validate dialog to write in the course's words
        if (!dialogs && !document.getElementById("released_assignments_list")) {
          return; // the Assignment List is not open: Lab's other changes cost one lookup
        }
        for (var i = 0; i < mutations.length; i++) {
          var target = mutations[i].target;
          target = target.nodeType === 3 ? target.parentElement : target;  // a text node's own change: its element
          if (target && target.nodeType === 1 && target.closest &&
              target.closest("#released_assignments_list, #fetched_assignments_list, #submitted_assignments_list, " +
                             ".jp-Dialog")) {
            // nbgrader's words (a button it just set back to "Submit") in the course's words now, before the page
            // is painted again: a student never sees them in English; the due dates follow after a short wait
            relabelPanel();
            schedule();
            return;
          }
          var added = mutations[i].addedNodes || [];
          for (var j = 0; dialogs && j < added.length; j++) {
            if (added[j].nodeType === 1 && added[j].querySelector && (added[j].classList.contains("jp-Dialog") ||
                added[j].querySelector(".jp-Dialog"))) {
              schedule();
              return;
            }
          }
        }
      }).observe(document.body, { childList: true, characterData: true, subtree: true });
      schedule();
      // the countdown moves on; and rows a mutation did not announce (the panel drawn while Lab was
      // still starting) are labelled within two seconds
      var beats = 0;
      setInterval(function () {
        beats += 1;
        if (beats % 15 === 0) {
          tick();
        }
        if (document.getElementById("released_assignments_list") && !running && unmarked().length) {
          schedule();
        }
      }, 2000);
    }
  };

  var container = {
    init: function () {
      return Promise.resolve();
    },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error(NAME + " has no module " + module));
      }
      return Promise.resolve(function () {
        return { __esModule: true, default: plugin };
      });
    }
  };

  container.dueText = dueText;  // for the course's tests (nbgrader-oracle/tests/test_coursetime.py runs them in node)
  container.translated = translated;

  var registry = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  registry[NAME] = container;
})();
