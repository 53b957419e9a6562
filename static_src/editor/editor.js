// kubedash's YAML editor (templates/web/edit/yaml.html): CodeMirror 6 over the form's
// <textarea>, which stays the field that is posted (without JavaScript it is the editor).
// With JavaScript: YAML highlighting, indentation (Tab / Shift-Tab; Esc then Tab leaves the
// editor), line numbers, undo; and Save shows the changes first (a diff of the object as
// loaded against the text about to be saved), then saves on the second press. The lines the
// server's errors point at (the textarea's data-error-lines) are marked, and the first is shown.
import {EditorState, StateField} from "@codemirror/state";
import {Decoration, EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection} from "@codemirror/view";
import {defaultKeymap, history, historyKeymap, indentWithTab} from "@codemirror/commands";
import {syntaxHighlighting, defaultHighlightStyle, indentOnInput, bracketMatching, indentUnit} from "@codemirror/language";
import {yaml} from "@codemirror/lang-yaml";
import {unifiedMergeView} from "@codemirror/merge";

function labelOf(textarea) {
  var label = document.querySelector('label[for="' + textarea.id + '"]');
  return label ? label.textContent.trim() : "YAML";
}

function readOnlyDiff(original, current) {
  return new EditorView({
    state: EditorState.create({
      doc: current,
      extensions: [
        EditorState.readOnly.of(true), EditorView.editable.of(false), lineNumbers(),
        yaml(), syntaxHighlighting(defaultHighlightStyle),
        unifiedMergeView({original: original, mergeControls: false, highlightChanges: true, gutter: true}),
        EditorView.contentAttributes.of({"aria-label": "Changes to be saved (read only)"}),
      ],
    }),
  });
}

// The error lines as line decorations (class cm-error-line), kept on their text while it is edited.
function errorMarks(textarea) {
  var numbers = (textarea.getAttribute("data-error-lines") || "").split(/\s+/).filter(Boolean).map(Number);
  var mark = Decoration.line({class: "cm-error-line", attributes: {"data-error-line": "true"}});
  return StateField.define({
    create: function (state) {
      return Decoration.set(numbers.filter(function (n) { return n >= 1 && n <= state.doc.lines; })
        .map(function (n) { return mark.range(state.doc.line(n).from); }));
    },
    update: function (marks, tr) { return marks.map(tr.changes); },
    provide: function (field) { return EditorView.decorations.from(field); },
  });
}

function setUp(textarea) {
  var form = textarea.form;
  var originalField = document.getElementById("yaml-original");
  var original = originalField ? originalField.value : null;
  var view = new EditorView({
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightActiveLine(), drawSelection(), history(),
        indentOnInput(), bracketMatching(), indentUnit.of("  "), EditorState.tabSize.of(2),
        yaml(), syntaxHighlighting(defaultHighlightStyle), errorMarks(textarea),
        keymap.of([indentWithTab].concat(defaultKeymap, historyKeymap)),
        // CodeMirror owns view.dom's attributes: ours go through its facet, or they are reset.
        EditorView.editorAttributes.of({class: "yaml-editor", "data-editor": "codemirror"}),
        EditorView.contentAttributes.of({"aria-label": labelOf(textarea), "aria-describedby": textarea.getAttribute("aria-describedby") || "yaml-editor-keys"}),
        EditorView.updateListener.of(function (update) {
          if (update.docChanged) { textarea.value = update.state.doc.toString(); reviewed = null; }
        }),
      ],
    }),
  });
  textarea.hidden = true;
  textarea.setAttribute("aria-hidden", "true");
  textarea.parentNode.insertBefore(view.dom, textarea);
  var hint = document.getElementById("yaml-editor-keys");
  if (hint) hint.hidden = false;
  // The label focuses the editor, as it focused the textarea.
  var label = document.querySelector('label[for="' + textarea.id + '"]');
  if (label) label.addEventListener("click", function (e) { e.preventDefault(); view.focus(); });
  if (textarea.getAttribute("aria-invalid") === "true") view.contentDOM.setAttribute("aria-invalid", "true");
  var first = Number((textarea.getAttribute("data-error-lines") || "").split(/\s+/)[0]);
  if (first >= 1 && first <= view.state.doc.lines) {
    view.dispatch({effects: EditorView.scrollIntoView(view.state.doc.line(first).from, {y: "center"})});
  }

  if (original === null || !form) return;
  // Review before save: the first Save shows what will change; Save again sends it.
  var reviewed = null, diffView = null;
  var panel = document.getElementById("yaml-review");
  var save = form.querySelector('button[type=submit][value=save]');
  var saveLabel = save ? save.textContent : "";
  function review(text) {
    if (diffView) diffView.destroy();
    var body = panel.querySelector(".review-body");
    var note = panel.querySelector(".review-note");
    body.textContent = "";
    if (text === original) {
      note.textContent = "No changes: the text is the object as it was loaded.";
      diffView = null;
    } else {
      note.textContent = "Each changed line is shown as it was (no line number, red edge) above what it becomes (green edge), with the changed characters highlighted. Save again to apply, or keep editing.";
      diffView = readOnlyDiff(original, text);
      body.appendChild(diffView.dom);
    }
    panel.hidden = false;
    panel.querySelector("h2").focus();
    reviewed = text;
    if (save) save.textContent = "Save these changes";
  }
  var reviewButton = document.getElementById("yaml-review-button");
  if (reviewButton) {
    reviewButton.hidden = false;
    reviewButton.addEventListener("click", function () { review(view.state.doc.toString()); });
  }
  form.addEventListener("submit", function (e) {
    var submitter = e.submitter;
    if (submitter && submitter !== save) return;
    var text = view.state.doc.toString();
    textarea.value = text;
    if (reviewed !== text) { e.preventDefault(); review(text); }
  });
  // Editing after a review asks for a fresh one.
  view.dom.addEventListener("keydown", function () {
    if (save && reviewed !== null) setTimeout(function () {
      if (reviewed !== view.state.doc.toString()) save.textContent = saveLabel;
    }, 0);
  });
}

function start() {
  Array.prototype.forEach.call(document.querySelectorAll("textarea[data-editor=yaml]"), setUp);
}
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
