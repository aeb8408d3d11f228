"""Submit: the same submission `arena submit` sends, through the arena's API (`ARENA_URL`), and
the status of a submission of yours. The page holds nothing: the token is sent with each call.
A LowBArena task asks for the quantized checkpoint (`artifact`) in place of a speculator, and a
kind that labels the quantization (int8, w4a16, ...)."""

import streamlit as st

from speculator_arena.frontdoor.client import Client, SubmitError, build_submission
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.lowb import is_lowb_task, lowb_task_ids
from speculator_arena.rules.status import FETCHING


def _client(token: str) -> Client:
    return Client(token=token.strip(), timeout=120)


def main() -> None:
    proto = load_protocol()
    st.title("Submit")
    client = _client("")
    st.caption(
        f"Submissions go to the arena's API at {client.url} (protocol v{proto.version}, section 2). "
        "Your token was shown once when your account was made; the arena keeps only its hash."
    )
    token = st.text_input("Token", type="password", key="submit_token")
    tasks = proto.public_tasks() + [t for t in proto.tasks if t not in proto.public_tasks()] + lowb_task_ids()
    task = st.selectbox("Task", tasks, key="submit_task")  # outside the form: the fields follow the arena
    lowb = is_lowb_task(task)
    with st.form("submission"):
        split = st.selectbox("Split", ["dev", "test"], key="submit_split")
        if lowb:
            kind = st.text_input("Quantization kind (a short label: int8, w4a16, nvfp4)", key="submit_lowb_kind")
        else:
            kind = st.selectbox("Solution kind", list(proto.submission.kinds), key="submit_kind")
        method = st.text_input("Method (free text)", key="submit_method")
        archive = st.file_uploader(
            "Engine directory as .tar.gz (launch.sh at its top)", type=["gz", "tgz"], key="submit_archive"
        )
        repo = st.text_input("…or an engine repository URL@COMMIT (40 hex)", key="submit_repo")
        if lowb:
            artifact = st.text_input(
                "Quantized checkpoint: workspace:/DIR or Hugging Face REPO@COMMIT", key="submit_artifact"
            )
            speculator = ""
        else:
            speculator = st.text_input("Speculator: Hugging Face REPO@COMMIT (optional)", key="submit_speculator")
            artifact = ""
        sent = st.form_submit_button("Submit")
    if sent:
        try:
            doc = build_submission(
                task,
                split,
                kind,
                method,
                engine_repo=repo.strip() or None,
                engine_archive=archive.getvalue() if archive else None,
                speculator=speculator.strip() or None,
                artifact=artifact.strip() or None,
            )
            got = _client(token).submit(doc)
        except SubmitError as exc:
            st.error(f"Refused: {exc}")
        else:
            st.session_state["submit_follow"] = got["submission_id"]
            st.success(
                f"Accepted: submission {got['submission_id']}, evaluation {got['evaluation_id']} is {got['status']}"
                + (" (the arena fetches what it names, then queues it)." if got["status"] == FETCHING else ".")
            )

    st.subheader("Your submission's status")
    sid = st.text_input("Submission id", key="submit_follow")
    if sid and token and st.button("Refresh status"):
        try:
            status = _client(token).status(sid.strip())
        except SubmitError as exc:
            st.error(str(exc))
        else:
            st.metric("Status", status["status"])
            if status.get("position"):
                st.markdown(f"Position in the queue: **{status['position']}**")
            if status.get("progress"):
                st.markdown(f"Runner: {status['progress']}")
            if status.get("refusal"):
                st.error(f"Refused ({status.get('refusal_status')}): {status['refusal']}")
            st.markdown(f"[The evaluation's page]({status['evaluation_url']})")
            st.json(status)


main()
