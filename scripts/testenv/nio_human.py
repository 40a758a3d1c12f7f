#!/usr/bin/python3
"""A person on another Matrix client, for the integration tests: matrix-nio with libolm (the
Debian packages python3-matrix-nio and python3-olm), an implementation independent of the
matrix-sdk squidbot uses. Each call is one step; the device (its keys and Olm sessions) lives
in STORE between calls, as a real client's would.

    nio_human.py login STORE HOMESERVER USER PASSWORD   log in as a new device
    nio_human.py dm STORE BOT                           create an encrypted DM, invite BOT; print its id
    nio_human.py wait-joined STORE ROOM USER            until USER joined ROOM
    nio_human.py say STORE ROOM TEXT...                 send each TEXT, in order; print
                                                        their event ids as a JSON array
    nio_human.py edit STORE ROOM EVENT TEXT             replace EVENT's text with TEXT (m.replace,
                                                        as Element sends an edit); print its id
    nio_human.py reply STORE ROOM EVENT TEXT            reply to EVENT as current clients do (no
                                                        quoted fallback); print its id
    nio_human.py send-file STORE ROOM PATH CAPTION      upload PATH encrypted and send it with
                                                        CAPTION as its body (Matrix 1.10 captions)
    nio_human.py send-voice STORE ROOM PATH [CAPTION]   send the WAV at PATH as a voice message
                                                        (m.audio with MSC3245's voice marker and
                                                        its duration, as Element records them),
                                                        encrypted in an encrypted room; print its id
    nio_human.py group STORE ENCRYPTED USER...          create a room (not a DM; encrypted when
                                                        ENCRYPTED is "yes"), invite USERs; print its id
    nio_human.py join STORE ROOM                        join ROOM (after an invite)
    nio_human.py set-name STORE NAME                    set the account's display name
    nio_human.py say-late-key STORE ROOM SECONDS TEXT   send TEXT in a new megolm session whose
                                                        key goes out SECONDS later (a slow client)
    nio_human.py verify STORE USER DEVICE               verify USER's DEVICE with emoji (SAS),
                                                        confirming; print {"verified": bool,
                                                        "emoji": [symbols]} as JSON
    nio_human.py replies STORE ROOM SENDER COUNT        until SENDER has COUNT messages in ROOM
                                                        (decrypted, from the server's history);
                                                        print their bodies as a JSON array
                                                        (notices as "notice: BODY")

Exit status 0 on success; on a timeout (60 s) or an error, 1 with the reason on stderr.
"""
import asyncio
import json
import os
import sys
import time

from uuid import uuid4

from nio import (
    Api,
    AsyncClient,
    AsyncClientConfig,
    LoginResponse,
    MegolmEvent,
    MessageDirection,
    RoomCreateResponse,
    RoomMessagesResponse,
    RoomMessageNotice,
    RoomMessageText,
    RoomSendResponse,
    ShareGroupSessionResponse,
    UploadResponse,
    ToDeviceResponse,
)

TIMEOUT = 60.0


def fail(why):
    print(f"nio_human: {why}", file=sys.stderr)
    sys.exit(1)


def session_path(store):
    return os.path.join(store, "session.json")


async def client_for(store):
    with open(session_path(store), encoding="utf-8") as f:
        saved = json.load(f)
    config = AsyncClientConfig(store_sync_tokens=True, encryption_enabled=True)
    client = AsyncClient(saved["homeserver"], saved["user_id"], device_id=saved["device_id"],
                         store_path=store, config=config)
    client.restore_login(saved["user_id"], saved["device_id"], saved["access_token"])
    await settle(client, full_state=True)
    return client


async def settle(client, full_state=False, timeout=0):
    """One sync, then every key request the client owes (upload, query, claim)."""
    await client.sync(timeout=timeout, full_state=full_state)
    if client.should_upload_keys:
        await client.keys_upload()
    if client.should_query_keys:
        await client.keys_query()
    if client.should_claim_keys:
        await client.keys_claim(client.get_users_for_key_claiming())


async def login(store, homeserver, user, password):
    os.makedirs(store, exist_ok=True)
    config = AsyncClientConfig(store_sync_tokens=True, encryption_enabled=True)
    client = AsyncClient(homeserver, user, store_path=store, config=config)
    response = await client.login(password, device_name="nio-human")
    if not isinstance(response, LoginResponse):
        fail(f"login: {response}")
    with open(session_path(store), "w", encoding="utf-8") as f:
        json.dump({"homeserver": homeserver, "user_id": response.user_id,
                   "device_id": response.device_id, "access_token": response.access_token}, f)
    await settle(client, full_state=True)
    await client.close()


async def dm(store, bot):
    client = await client_for(store)
    encryption = {"type": "m.room.encryption", "state_key": "",
                  "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
    response = await client.room_create(is_direct=True, invite=[bot], initial_state=[encryption])
    if not isinstance(response, RoomCreateResponse):
        fail(f"room_create: {response}")
    print(response.room_id)
    await client.close()


async def wait_joined(store, room, user):
    client = await client_for(store)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        members = await client.joined_members(room)
        if any(m.user_id == user for m in getattr(members, "members", [])):
            await settle(client)
            await client.close()
            return
        await settle(client, timeout=1000)
    fail(f"{user} never joined {room}")


async def say(store, room, texts):
    client = await client_for(store)
    ids = []
    for text in texts:
        content = {"msgtype": "m.text", "body": text}
        response = await client.room_send(room, "m.room.message", content,
                                          ignore_unverified_devices=True)
        if not isinstance(response, RoomSendResponse):
            fail(f"room_send: {response}")
        ids.append(response.event_id)
    await client.close()
    print(json.dumps(ids))


async def edit(store, room, event, text):
    client = await client_for(store)
    content = {
        "msgtype": "m.text",
        "body": f"* {text}",
        "m.new_content": {"msgtype": "m.text", "body": text},
        "m.relates_to": {"rel_type": "m.replace", "event_id": event},
    }
    response = await client.room_send(room, "m.room.message", content,
                                      ignore_unverified_devices=True)
    if not isinstance(response, RoomSendResponse):
        fail(f"room_send: {response}")
    await client.close()
    print(response.event_id)


async def send_content(store, room, content):
    client = await client_for(store)
    response = await client.room_send(room, "m.room.message", content,
                                      ignore_unverified_devices=True)
    if not isinstance(response, RoomSendResponse):
        fail(f"room_send: {response}")
    await client.close()
    print(response.event_id)


async def reply(store, room, event, text):
    await send_content(store, room, {
        "msgtype": "m.text",
        "body": text,
        "m.relates_to": {"m.in_reply_to": {"event_id": event}},
    })


async def send_file(store, room, path, caption):
    client = await client_for(store)
    with open(path, "rb") as f:
        data = f.read()
    name = os.path.basename(path)
    response, keys = await client.upload(lambda *_: data, content_type="text/plain",
                                         filename=name, encrypt=True, filesize=len(data))
    if not isinstance(response, UploadResponse):
        fail(f"upload: {response}")
    await client.close()
    await send_content(store, room, {
        "msgtype": "m.file",
        "body": caption,
        "filename": name,
        "info": {"mimetype": "text/plain", "size": len(data)},
        "file": {"url": response.content_uri, "key": keys["key"], "iv": keys["iv"],
                 "hashes": keys["hashes"], "v": keys["v"]},
    })


async def send_voice(store, room, path, caption=""):
    import wave
    with wave.open(path, "rb") as w:
        duration_ms = int(w.getnframes() * 1000 / w.getframerate())
    client = await client_for(store)
    with open(path, "rb") as f:
        data = f.read()
    name = os.path.basename(path)
    encrypted = client.rooms[room].encrypted if room in client.rooms else False
    response, keys = await client.upload(lambda *_: data, content_type="audio/wav",
                                         filename=name, encrypt=encrypted, filesize=len(data))
    if not isinstance(response, UploadResponse):
        fail(f"upload: {response}")
    await client.close()
    content = {
        "msgtype": "m.audio",
        "body": caption or name,
        "filename": name,
        "info": {"mimetype": "audio/wav", "size": len(data), "duration": duration_ms},
        "org.matrix.msc1767.audio": {"duration": duration_ms, "waveform": []},
        "org.matrix.msc3245.voice": {},
    }
    if encrypted:
        content["file"] = {"url": response.content_uri, "key": keys["key"], "iv": keys["iv"],
                           "hashes": keys["hashes"], "v": keys["v"]}
    else:
        content["url"] = response.content_uri
    await send_content(store, room, content)


async def group(store, encrypted, users):
    client = await client_for(store)
    state = []
    if encrypted == "yes":
        state.append({"type": "m.room.encryption", "state_key": "",
                      "content": {"algorithm": "m.megolm.v1.aes-sha2"}})
    response = await client.room_create(is_direct=False, invite=users, initial_state=state)
    if not isinstance(response, RoomCreateResponse):
        fail(f"room_create: {response}")
    print(response.room_id)
    await client.close()


async def join(store, room):
    client = await client_for(store)
    response = await client.join(room)
    if not hasattr(response, "room_id"):
        fail(f"join: {response}")
    await settle(client)
    await client.close()


async def set_name(store, name):
    client = await client_for(store)
    await client.set_displayname(name)
    await client.close()


async def say_late_key(store, room, seconds, text):
    """TEXT encrypted in a fresh megolm session; the room key (at the index TEXT used) is
    sent to the members' devices only SECONDS after TEXT itself."""
    client = await client_for(store)
    missing = client.get_missing_sessions(room)
    if missing:
        await client.keys_claim(missing)
    client.olm.rotate_outbound_group_session(room)
    members = list(client.rooms[room].users.keys())
    key_messages = [
        Api.to_device(client.access_token, "m.room.encrypted", to_device, uuid4())
        for _, to_device in client.olm.share_group_session_parallel(
            room, members, ignore_unverified_devices=True)
    ]
    client.olm.outbound_group_sessions[room].shared = True
    content = client.olm.group_encrypt(
        room, {"type": "m.room.message", "content": {"msgtype": "m.text", "body": text}})
    method, path, data = Api.room_send(client.access_token, room, "m.room.encrypted", content,
                                       uuid4())
    response = await client._send(RoomSendResponse, method, path, data, response_data=(room,))
    if not isinstance(response, RoomSendResponse):
        fail(f"room_send: {response}")
    await asyncio.sleep(seconds)
    for method, path, data in key_messages:
        response = await client._send(ShareGroupSessionResponse, method, path, data,
                                      response_data=(room, set()))
        if not isinstance(response, ShareGroupSessionResponse):
            fail(f"sending the room key: {response}")
    await client.close()


async def verify(store, user, device_id):
    client = await client_for(store)
    if client.should_query_keys:
        await client.keys_query()
    device = client.device_store[user][device_id]
    response = await client.start_key_verification(device)
    if not isinstance(response, ToDeviceResponse):
        fail(f"start_key_verification: {response}")
    sas = client.olm.get_active_sas(user, device_id)
    if sas is None:
        fail("no verification under way")
    emoji = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and not sas.verified:
        await settle(client, timeout=500)
        await client.send_to_device_messages()
        if sas.canceled:
            fail(f"the verification was cancelled: {sas.cancel_reason}")
        if sas.other_key_set and not emoji:
            emoji = [symbol for symbol, _ in sas.get_emoji()]
            response = await client.confirm_short_auth_string(sas.transaction_id)
            if not isinstance(response, ToDeviceResponse):
                fail(f"confirm_short_auth_string: {response}")
    verified = client.device_store[user][device_id].verified
    print(json.dumps({"verified": verified, "emoji": emoji}))
    await client.close()


async def history(client, room, sender):
    """SENDER's message bodies in ROOM, oldest first, from the server's history."""
    bodies = []
    token = client.next_batch
    for _ in range(20):
        response = await client.room_messages(room, token, direction=MessageDirection.back,
                                              limit=100)
        if not isinstance(response, RoomMessagesResponse):
            fail(f"room_messages: {response}")
        for event in response.chunk:
            if isinstance(event, MegolmEvent):
                try:
                    event = client.decrypt_event(event)
                except Exception:  # noqa: BLE001 - not decryptable (yet): not a reply seen
                    continue
            if event.sender != sender:
                continue
            if isinstance(event, RoomMessageText):
                bodies.append(event.body)
            elif isinstance(event, RoomMessageNotice):
                bodies.append(f"notice: {event.body}")
        if not response.end or response.end == token or not response.chunk:
            break
        token = response.end
    bodies.reverse()
    return bodies


async def replies(store, room, sender, count):
    client = await client_for(store)
    deadline = time.monotonic() + TIMEOUT
    bodies = []
    while time.monotonic() < deadline:
        bodies = await history(client, room, sender)
        if len(bodies) >= count:
            print(json.dumps(bodies))
            await client.close()
            return
        await settle(client, timeout=1000)
    fail(f"expected {count} messages from {sender}, got {json.dumps(bodies)}")


def main(argv):
    if len(argv) < 3:
        fail(__doc__)
    command, store, rest = argv[1], argv[2], argv[3:]
    steps = {
        "login": lambda: login(store, *rest),
        "dm": lambda: dm(store, *rest),
        "wait-joined": lambda: wait_joined(store, *rest),
        "say": lambda: say(store, rest[0], rest[1:]),
        "edit": lambda: edit(store, *rest),
        "reply": lambda: reply(store, *rest),
        "send-file": lambda: send_file(store, *rest),
        "send-voice": lambda: send_voice(store, *rest),
        "group": lambda: group(store, rest[0], rest[1:]),
        "join": lambda: join(store, *rest),
        "set-name": lambda: set_name(store, *rest),
        "say-late-key": lambda: say_late_key(store, rest[0], float(rest[1]), rest[2]),
        "verify": lambda: verify(store, *rest),
        "replies": lambda: replies(store, rest[0], rest[1], int(rest[2])),
    }
    if command not in steps:
        fail(f"unknown command {command}")
    asyncio.run(steps[command]())


if __name__ == "__main__":
    main(sys.argv)
