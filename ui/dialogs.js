// The page's shared dialogs and notices: the API key prompt, the
// confirmation before a destructive action, and the notice line.

import { apiKey, setApiKey } from './api.js';

const $ = (id) => document.getElementById(id);

/** Shows `message` in the notice line (an alert for screen readers). */
export function notify(message, isError = false) {
  const notice = $('notice');
  notice.textContent = message;
  notice.className = isError ? 'error' : 'info';
  notice.hidden = !message;
}

/** Asks for the API key; resolves true once one is set, false if cancelled. */
export function askForKey(reason) {
  const dialog = $('key-dialog');
  const input = $('key-input');
  $('key-reason').textContent = reason
    ? `${reason}. The key is kept in this tab only (session storage) and sent as the bearer on every request.`
    : 'The key is kept in this tab only (session storage) and sent as the bearer on every request.';
  input.value = apiKey() || '';
  return new Promise((resolve) => {
    const done = (answer) => {
      $('key-form').onsubmit = null;
      $('key-cancel').onclick = null;
      $('key-forget').onclick = null;
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    $('key-form').onsubmit = (event) => {
      event.preventDefault();
      setApiKey(input.value.trim());
      done(Boolean(input.value.trim()));
    };
    $('key-cancel').onclick = () => done(false);
    $('key-forget').onclick = () => {
      setApiKey(null);
      done(false);
    };
    dialog.onclose = () => done(false);
    dialog.showModal();
    input.focus();
  });
}

/** Asks to confirm `text`; resolves true only on the confirm button. */
export function confirmAction(title, text, confirmLabel) {
  const dialog = $('confirm-dialog');
  $('confirm-title').textContent = title;
  $('confirm-text').textContent = text;
  $('confirm-yes').textContent = confirmLabel;
  return new Promise((resolve) => {
    const done = (answer) => {
      $('confirm-form').onsubmit = null;
      $('confirm-no').onclick = null;
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    $('confirm-form').onsubmit = (event) => {
      event.preventDefault();
      done(true);
    };
    $('confirm-no').onclick = () => done(false);
    dialog.onclose = () => done(false);
    dialog.showModal();
    // Cancel is the safe default for Enter.
    $('confirm-no').focus();
  });
}
