package search

import (
	"strings"
	"sync"
)

// relatedGroups are sets of words that a user's task and a tool's text
// use for the same thing ("folder" and "directory", "shut down" and
// "stop"). A query term also finds the other words of each group it is
// in, at relatedWeight: a tool that shares the user's own word still
// ranks first. A word of several groups gets the members of each, never
// their groups' groups (no closure: "add" is in "create" and in "sum",
// and "create" must not lead to "sum").
//
// A member a_b is a phrase: the query's terms a and b, one after the
// other once stop words are dropped ("shut down", "money back"); it
// leads to its group, and no index term is a phrase. A phrase whose
// second word is a stop word ("turn on") cannot be one: such pairs are
// compounds (terms.go), one term in tools and queries alike ("turnon").
//
// The table is written for the vocabulary of tool catalogs: actions on
// records (create, list, update, delete, search), and the objects of
// common services (mail, calendars, files, repositories, payments,
// infrastructure, the web), and for the words users say for them
// (docs/context.md: lexicons written from the catalog, and the tasks of
// 27 writers).
// Words are stemmed like the index's terms.
const relatedGroups = `
create make add new open start set setup register log put stick
start launch begin trigger run boot turnon kick_off
get fetch retrieve read show view see look display obtain open pull detail grab
list show enumerate browse all every inventory ls
find search lookup query locate seek where ever any discover look_up grep dig_up track_down hunt pull_up
update change edit modify set alter adjust patch tweak replace correct bump
delete remove erase destroy drop forget purge clear wipe trash discard archive unsubscribe
send post publish announce share deliver shoot fire_off
tell say notify message inform ping ask let_know msg msgs
reply answer respond get_back text_back write_back
stop halt end kill pause shut terminate cancel disable shut_down turnoff
cancel abort revoke stop unsubscribe
save store remember persist keep record write note jot memorize
remember memory recall know keep_mind
upload put push store backup
download save pull fetch export
copy duplicate clone fork
move rename transfer relocate
merge combine join concatenate
run execute exec invoke launch evaluate
schedule book plan arrange calendar organize
book reserve reservation
pay payment charge bill invoice checkout deposit
refund reimburse repay money_back
summarize summary overview transcript gist tldr
approve review accept
assign give delegate reassign owner hand_over hand_off handoff
complete finish done close resolve tick_off
install deploy setup set_up
scale resize replica
rollback revert undo rollout roll_back
watch monitor track observe alert change keep_eye whenever
draw generate paint illustrate image picture render art whip_up design make watercolor watercolour mascot logo sketch
type enter fill input form write
click press tap button
navigate go visit open browse url
reason think step problem sequential
calculate compute add sum total plus
repeat echo
file document doc
folder directory dir
email mail message inbox
meeting event appointment invite calendar
picture image photo screenshot drawing illustration pic pics jpg jpeg png gif
page website site webpage url link web
web internet online
bug issue problem defect error crash fail failure broken
ticket case request support help customer
repository repo project codebase
pull pr merge pull_request merge_request mr
branch main master trunk
commit change
note memo notebook jot jot_down recipe make_note take_note
task todo chore reminder remind
contact person people lead customer client address
customer client buyer
deal opportunity sale pipeline upsell won
company organization account business
money payment funds balance cash
subscription plan membership recurring monthly
invoice bill
vm server instance machine host box
container docker
pod kubernetes deployment
dns domain record dmarc spf cname
cache cdn
stock share ticker equity market trading
currency money exchange dollar euro eur usd gbp jpy cad aud chf
weather forecast rain snow temperature storm sunny wind umbrella dry wet rainy cloudy chuck_down
air pollution quality smog asthma
warning alert alarm firing
flight plane airline fly airport nonstop nonstops layover delayed ontime
hotel stay lodging accommodation room
employee staff colleague worker coworker job_title guy hire
manager boss supervisor org chart reporting_up reports_to
vacation holiday leave absence time_off timeoff pto ooo out_office dayoff
visitor user traffic session pageview audience
call phone dial ring
outage down incident page went_down
metric cpu memory usage latency load
log output
table column schema
build pipeline ci job workflow
song track music tune
news headline coverage press
time clock timezone hour utc gmt pst pdt est edt cst cdt cet cest bst ist jst aest pacific eastern
text word content
address location place street coordinates geocode
restaurant place food eat spot ramen pizza sushi cafe coffee brunch bakery
direction route drive driving navigate walk walking foot
distance far long travel
elevation altitude height sea_level
spreadsheet sheet excel row cell
row line record entry
chat channel
reaction emoji thumb
tweet post twitter people_say folks_say
article encyclopedia wiki wikipedia biography
code source snippet script program
python script numpy pandas
knowledge kb documents
paper research scientific study publication arxiv doi
credit quota usage balance
price cost spend expense
diff difference change
history log past timeline catch_up commit
heat warm warmer thermostat temperature cold
light lamp
receipt scan ocr handwriting whiteboard written writing type_out read_off read_out
recording video
transcript caption subtitle
sms text
play listen puton
language translate translation english french german spanish italian portuguese dutch chinese japanese korean russian arabic polish swedish norwegian danish finnish greek turkish hindi hebrew vietnamese thai indonesian ukrainian czech romanian hungarian swahili tagalog
size big large small huge bytes largest biggest smallest
modified changed updated last
status state done progress transition workflow stage
dm direct message
channel room
thread conversation reply
user member account profile
nearby near around close local
coordinates latitude longitude lat lon
screenshot capture snapshot screen
scrape extract crawl content pull_out
browser tab window
upload attach attachment
database db sql postgres mysql pg psql
kubernetes k8s kubectl cluster namespace
helm chart
documentation docs reference manual guide library api
memory knowledge graph entity observation fact prefer prefers hate hates dislike preference allergic
unread inbox
attendee invite guest participant
free busy availability available slot
accept decline rsvp respond
lead prospect
ticket complaint
priority urgent important
sprint cycle iteration
bucket storage blob object
presign temporary expiring share
tag label category
due deadline
ban block
detect identify recognize
earnings revenue financials income profit
convert conversion
trip travel journey itinerary
product item catalog merchandise goods
order purchase bought
ship shipped fulfill deliver tracking shipment
inventory stock quantity left remaining
analytics statistics stats report ga
realtime live active currently
acknowledge ack
dashboard chart graph
mute silence snooze
release deploy ship
domain hostname subdomain
launch spin
phonebook addressbook contact
conference videoconference webinar meeting
lock unlock door
overdue past_due late unpaid outstanding
laptop computer desktop disk local filesystem
js javascript
ts typescript
living_room kitchen bedroom house home
agenda schedule calendar goingon goton plans diary diarise diarize
draft write_up compose unsent
cite citation cited reference
research investigate deep_dive writeup thorough comprehensive
reschedule postpone push_back move_meeting change_time rearrange
free_time free_slot open_slot time_slot timeslot availability
invitation invite invites invitations rsvp
decline turn_down say_no regrets
tentatively tentative
zoom video_call videocall webex
meeting standup huddle catchup
upcoming coming_up planned
subject subject_line
cc bcc carbon_copy
label flag flagged
message msg msgs
sms texting texted txt text_message
reacting thumbs_up emoji
ban kick_out boot_out throw_out
phone_call ring_up voice_call
carrier caller caller_id reverse_lookup
task tasks checklist action_item action_items todos
complete mark_done cross_off check_off knock_out
append add_bottom add_end
append add_row add_rows new_row insert_row
subdirectory subdirectories subfolder subfolders subdir
tree hierarchy nested recursive
permissions perms chmod access_rights
path filepath file_path pathname
glob wildcard pattern
gzip compress compression zipped tarball gz
address postcode zip_code postal_code zipcode street_address
pdf pdfs acrobat print_pdf save_pdf export_pdf
fill fill_out populate
google_drive gdrive dropbox onedrive sharepoint
spreadsheet workbook xlsx gsheet gsheets airtable
deal deals oppty opps opp
stage funnel phase lifecycle_stage
amount deal_size deal_value
close_date closing_date expected_close
crm hubspot salesforce sfdc
owner sales_rep account_manager account_owner
company firm corp corporation
helpdesk help_desk zendesk freshdesk service_desk servicedesk
requester submitter reporter
assignee support_agent support_rep csr
urgency severity sev critical
internal internal_note private_note
comment comments remark annotate
escalation escalate escalated
resolve resolved solved fixed mitigated
tracker jira linear issue_tracker bug_tracker
story epic subtask user_story
estimate estimation story_points storypoints sizing
transition wip underway ongoing
board kanban scrum_board backlog
assignee assigned
github gitlab bitbucket gh
pull_request pull_requests prs mrs merge_requests
success succeeded passing passed green_build
failed failing broken red_build
git_checkout switch_branch change_branch swap_branch
staged stage_files unstaged
working_tree uncommitted dirty local_changes
rebase rebased update_branch sync_branch base_branch
circleci jenkins github_actions travis buildkite
rerun retry rebuild re_run rekick
logs stdout stderr build_log job_log
tail tailing follow_logs stream_logs last_lines
deploy redeploy deploying go_live push_prod rollout
workload deployment daemonset statefulset replicaset
scale scale_up scale_down upscale downscale replicas
cordon drain uncordon evict node_maintenance
port_forward portforward tunnel forwarding
command shell bash cli command_line
kubeconfig kube_context kubecontext contexts
upgrade upgrading newer_version latest_version
uninstall teardown tear_down rip_out
describe inspect examine
cleanup clean_up tidy_up
instance virtual_machine vms
launch provision spin_up fire_up
terminate decommission nuke
cost_report cost_explorer aws_bill cloud_bill cloud_spend
dockerfile docker_image container_image
registry dockerhub docker_hub ecr
region aws_region datacenter data_center
ip ip_address public_ip
cloudflare cf
dns nameserver nameservers resolver
purge flush invalidate invalidation bust
mysql sqlite mariadb
query sql_query run_sql
insert ddl dml migration alter_table create_table
datadog grafana prometheus new_relic splunk
timeseries time_series trend
error_rate failure_rate exceptions
latency response_time slowness lag laggy
monitor uptime health_check healthcheck
mute suppress quiet shush
widget widgets tiles
pagerduty opsgenie
oncall responder pager rota duty
acknowledge acked claim
service services microservice microservices
raise file_bug report_bug log_bug create
enhancement feature_request improvement issue
invoicing invoiced billed billing invoice
refund refunded chargeback reverse_charge
subscribe signup sign_up enroll
payment_link pay_link checkout_link buy_link
payment_method payment_methods card credit_card debit_card
shopify storefront webshop ecommerce online_store
variant variants sku skus
inventory restock sold_out out_stock replenish stock_level
fulfill dispatch dispatched send_out
tracking_number tracking_code tracking_id
shipping_address delivery_address
sick sick_leave sick_day ill unwell poorly
time_off annual_leave parental_leave maternity_leave paternity_leave
time_off off_work days_off out_sick
department dept division
employees staff_directory employee_directory company_directory headcount
reporting_lines direct_reports reportees
job_title designation
hr hris bamboohr workday human_resources people_ops
flight flights airfare fares plane_ticket plane_tickets
origin departure departing depart
destination arrival arriving
gate boarding boarding_gate
hotel motel inn hostel bnb resort airbnb
booking confirmation confirmation_number reservation_number pnr
passenger passengers traveler travelers traveller travellers pax
place places landmark attraction poi sights
directions transit public_transport bus subway metro bike cycling
distance mileage miles kilometres kilometers km
travel travel_time eta commute journey_time drive_time
rating ratings rated stars
opening_hours open_now business_hours closing_time
humidity humid muggy
severe floods flood flooding hurricane tornado blizzard heatwave typhoon
air_quality aqi pollutant pollutants haze smoke pollen
units celsius fahrenheit degrees centigrade imperial
temperature chilly freezing frost frosty jacket coat
sky overcast fog foggy drizzle sunshine hail sleet
weather rain pour pouring raining downpour showers
forecast prediction forecasted
headlines top_stories breaking_news current_events
web_search googling bing duckduckgo search_engine
scrape scraping scraper harvest
crawl crawler crawling spider
sitemap site_map url_inventory url_list
markdown md
playwright puppeteer selenium headless browser_automation
hover mouseover mouse_over
drag dragging drag_drop
dropdown drop_down select_option combobox picklist
keyboard keystroke keypress hotkey
navigate_back go_back previous_page back_button
dialog dialogue popup pop_up modal
dark_mode light_mode color_scheme colour_scheme theme
console devtools console_log
network xhr har http_requests api_calls
wait await wait_until
resize viewport window_size
preprint preprints pubmed biorxiv medrxiv
abstract abstracts synopsis
citers bibliography co_citation related_work
author authors researcher researchers
literature literature_review lit_review
song songs tunes jams banger bop
skip skip_song next_track next_song
resume unpause
currently_playing now_playing whats_playing
playlist playlists mixtape
artist artists band singer musician
light lights bulb bulbs lighting
turn_off switch_off power_off shut_off lights_out power_down
brightness dim dimmer brighten
thermostat hvac aircon air_conditioning heating heater furnace
lock deadbolt smart_lock
devices device appliance appliances gadget gadgets smart_home iot
appliance smart_plug plug outlet
home_assistant homeassistant hass
translate localize localise localization localisation
pptx powerpoint slides slide_deck
describe alt_text image_description
relation relations relationship relationships
current_time local_time time_now
timezone time_zone tz time_difference hours_ahead hours_behind
quote quotes share_price stock_price
price_history ohlc candlestick candles
ticker nasdaq nyse ftse dow
symbol symbols ticker_symbol
income_statement balance_sheet eps quarterly_results annual_report
exchange_rate fx forex conversion_rate
tweet tweets tweeted tweeting xeet
timeline feed recent_posts
username user_name screen_name
page_views pageviews visits sessions
top_pages most_viewed popular_pages most_visited
conversions goal_completions signups
video videos youtube yt clip clips
sandbox repl jupyter playground
pip npm dependency dependencies pypi
examples example tutorial sample_code
notion notion_page
template templates boilerplate blueprint
bucket object_storage cloud_storage gcs minio
presign presigned signed_url presigned_url share_link
address_book rolodex contact_list
phone_number mobile_number cell_number cellphone
alive responsive heartbeat reachable
reconnect reconnecting reestablish
download dl downloads
note journal journaling
invoice invoices receivables accounts_receivable debtors
overdue ar_aging aging_report aged_receivables aged_debtors
invoice dunning payment_reminder invoice_reminder overdue_notice
line_items line_item order_lines invoice_lines
balance account_balance available_balance bank_balance available_funds
charge transaction transactions txn payment_intent
stripe payment_gateway payment_processor merchant_account
payment venmo paypal zelle
subscriptions mrr recurring_revenue
subscription recurring_billing auto_renew autorenew renewal
cancel cancellation churn churned
payment_link payment_request money_request request_payment
price pricing price_point price_tag sticker_price list_price msrp
income_statement pnl profit_loss
financials fundamentals earnings_report quarterly_earnings
stock_quote last_price market_price trading_price
price_history historical_prices stock_chart daily_closes
stock etf etfs index_fund mutual_fund
exchange_rate fx_rate currency_rate
cost_report aws_spend aws_costs cloud_costs finops
amount acv tcv contract_value
stage closed_won closed_lost deal_stage pipeline_stage
lifecycle_stage mql marketing_qualified sales_qualified
crm pipedrive zoho_crm
company target_account key_account named_account
contact contact_record point_contact
ticket support_ticket support_request service_request trouble_ticket
reply public_reply customer_reply
priority blocker showstopper highest_priority
employee teammate team_member crew_member
employee new_hire new_starter new_joiner
employee employee_record personnel_file employee_profile
employees roster staff_list team_list
org_chart organigram organogram reporting_structure chain_command
manager line_manager reporting_manager direct_manager
time_off lieu_day comp_day comp_time
sick sickie sick_note fit_note doctors_note
schedule roster rota shift_schedule duty_roster shift_pattern
schedule oncall_rotation pager_rotation oncall_schedule
paging pager beeper bleep
incident major_incident service_disruption degradation
monitor alert_rule alerting_rule watchdog
metrics kpi kpis telemetry measurements
logs syslog journalctl log_lines logfile log_file
logs audit_log audit_trail event_log
dashboard dashboards status_board ops_board
instance droplet vps cloud_server compute_instance
ami golden_image machine_image
instance_type instance_size machine_type vm_size
env environment_variables env_vars envvars dotenv
repository monorepo git_repo source_repo
branch feature_branch topic_branch dev_branch
commit changeset sha commit_hash commit_id
review code_review pr_review
pipeline pipeline_run ci_run workflow_run build_run
dns_record dns_entry zone_record resource_record
domain dns_zone hosted_zone zone_file
dns ns ns_record
namespace ns
service svc
node worker_node kube_node
node entity vertex
javascript nodejs node_js ecmascript
python py
notebook jupyter colab ipynb
snippet gist code_snippet
package crate npm_package pip_package python_package node_module
library sdk client_library framework lib
sandbox code_interpreter scratchpad
shell terminal zsh powershell
ban blocklist blacklist denylist
viewer read_only view_only view_access
editor edit_access can_edit edit_rights
rows result_set resultset query_results
spreadsheet csv tsv
spreadsheet gradebook markbook mark_book
sheet worksheet worksheets sheet_tab
data_source datasource dataset
dimensions dimension breakdown
analytics google_analytics ga_property web_property
active_users concurrent_users concurrents users_online
top_pages landing_pages top_content
views view_count play_count
tweet tweetstorm twitter_thread
username twitter_handle x_handle social_handle
headlines hed heds
article news_story story wire_story news_piece
news newswire wire_service reuters
articles clippings press_clippings media_coverage press_mentions
summary standfirst dek lede
author byline writer
video vid vids vlog footage
recording footage meeting_recording cloud_recording
transcript meeting_minutes meeting_notes
song cover_version covers
spotify apple_music youtube_music deezer
guests covers diners party_size headcount
booking reservation table_booking dinner_reservation
order chit docket kitchen_ticket order_ticket
order purchase_order sales_order po
refund comped comp_meal
refund rma return_request return_merchandise
shop store storefront online_shop shopfront
customer shopper patron
shipped parcel parcels consignment
carrier courier shipping_carrier fedex dhl usps
inventory stocktake stock_take stock_count cycle_count
stock par_level reorder_point soh
tasks shopping_list grocery_list packing_list todo_list prep_list
task homework coursework
todoist ticktick asana task_manager todo_app
notebook jotter composition_book
paper journal_article manuscript academic_paper thesis dissertation journal
papers google_scholar semantic_scholar scholarly
citation bibliography works_cited reference_list
drive shared_drive team_drive cloud_drive
gmail mailbox inbox email_account hotmail yahoo_mail
label mail_folder email_folder
trash recycle_bin deleted_items wastebasket
thread email_chain email_thread reply_chain
invitation calendar_invite meeting_request cal_invite meeting_invite save_date evite
meeting touchbase touch_base one_one sit_down get_together
meeting retro retrospective all_hands allhands town_hall
meeting conference_call concall teleconference zoom_call
join_link meeting_link zoom_link meeting_url
calendar gcal google_calendar ical
event appt appts
schedule timetable timetables class_schedule
attendees guest_list invitee_list invitees attendee_list
location venue venues event_venue
wiki confluence intranet knowledge_base
documentation runbook runbooks playbook sop
kb help_center help_article faq knowledge_base
guild discord_server community_server
channel group_chat groupchat group_dm
emoji emote emoticon smiley
call robocall automated_call outbound_call voice_blast
caller caller_name cnam
sms twilio bulk_sms
translate deepl google_translate machine_translation
language locale lang dialect
form fillable fillable_form pdf_form acroform
image selfie selfies photograph
selector css_selector xpath locator element
monitor change_detection changedetection page_monitor website_monitor
flight flight_leg flight_segment
flight red_eye redeye overnight_flight
flights stopover connecting_flight layovers
confirmation booking_reference booking_ref reference_number record_locator
gate terminal airport_terminal
hotel vacation_rental holiday_let holiday_rental short_let
directions rail railway tram light_rail
coordinates gps gps_coordinates latlng geolocation
google_maps gmaps apple_maps waze
light light_fixture sconce chandelier downlight downlights
switch wall_switch light_switch
switch outlet wall_socket power_outlet
thermostat ecobee nest_thermostat
temperature setpoint set_point target_temp target_temperature
thermostat boiler central_heating radiators underfloor_heating
smart_lock yale schlage nuki
appliance dishwasher washing_machine tumble_dryer fridge kettle coffee_maker roomba robot_vacuum
weather precipitation precip rainfall
wind gust gusts wind_speed
temperature feels_like wind_chill heat_index apparent_temperature
close_date settlement_date completion_date escrow_date
event open_house property_viewing house_viewing
outlook outlook_calendar outlook_mail office_outlook
period timeframe time_frame time_window date_range
cancel call_off scrap_meeting
change_time bring_forward move_earlier pull_forward
accept attend attending
decline bow_out skip_meeting
free_time everyone_free mutually_free common_time
event occasion happening
calendar planner datebook day_planner
meeting sync_up syncup kickoff brainstorm workshop offsite
meeting lunch_meeting coffee_chat breakfast_meeting interview
title meeting_title event_title meeting_name meeting_topic
attendees add_guests add_people invite_people
zoom google_meet gmeet hangout hangouts skype facetime ms_teams microsoft_teams
recording recorded replay rewatch taped
transcript transcription transcribe transcribed stt speech_recognition
transcript verbatim discussed talked_about
captions closed_captions subtitles srt
event calendar_hold time_block block_time block_out focus_time
location meeting_room conference_room boardroom
join_link invite_link dialin call_link
summary recap rundown debrief
email emails e_mail emailed
send drop_line shoot_over bung
send fwd forward_email pass_along
body email_body message_body
sender senders sender_name
inbox new_mail new_emails incoming_mail received_mail
email correspondence
reply reply_all
draft drafts drafted
archive file_away stow inbox_zero
delete toss bin ditch
label categorize categorise file_under
label starred
email_address email_addr mail_address
sent sent_items sent_mail outbox sent_folder
email mail_app apple_mail thunderbird email_client
workspace slack_workspace slack_team
channel voice_channel voice_chat text_channel slack_channel discord_channel
message slack_message discord_message chat_message
slack slack_msg slacked
history scrollback chat_log chat_history message_history
react reaction reacted
reaction upvote thumbs_up
profile bio user_info profile_info
ban banish expel remove_member
post broadcast announcement
chat chatroom chat_room chats
message private_message direct_msg
users workspace_members slack_users
replies responses
task errand errands
task follow_up followup
due due_date duedate
deadline cutoff cut_off target_date
urgency urgent asap rush
overdue missed_deadline slipped
complete wrap_up wrapped_up crossed_off checked_off
todoist omnifocus wunderlist google_tasks microsoft_todo remember_milk any_do
pending open_items open_tasks incomplete unfinished
evernote obsidian onenote apple_notes google_keep notes_app
notebook obsidian_vault
note note_down write_down scribble
note brain_dump braindump
tag tags hashtag hashtags
append add_paragraph add_text
docx word_doc word_document ms_word microsoft_word
share give_access grant_access
download local_copy offline_copy
google_drive icloud icloud_drive
document paperwork
notion notion_doc notion_db notion_database
file files
folder folders
text_file plaintext plain_text
overwrite clobber replace_contents
replace find_replace search_replace substitute swap_out
mkdir new_folder make_folder create_directory make_dir
list_directory folder_contents directory_listing dir_listing whats_inside
size sizes disk_usage space_used file_size filesize
tree folder_structure directory_structure file_structure
move mv
rename renaming retitle change_name
file_type filetype file_extension ext
metadata file_info fileinfo file_properties file_details
creation creation_time date_created
allowed permitted accessible allowlist whitelist
audio wav sound_file audio_file
multiple bulk batch en_masse
dry_run dryrun trial_run test_run
exclude excluding omit leave_out
pdf pdf_file adobe adobe_reader
merge stitch stitch_together staple collate
extract pull_text grab_text text_extraction
pdf printable printable_version print_friendly
fill fill_blanks
convert turn_into change_into
spreadsheet google_sheets excel_sheet libreoffice_calc
cell cells cell_range
column columns col cols
values cell_values
clear blank_out empty_out zero_out
airtable airtable_base
spreadsheet ledger tally_sheet
crm client_list client_database customer_database sales_database
contact sales_lead inbound_lead warm_lead
deal opportunities potential_sale
deal sales_pipeline deal_flow sales_funnel
stage sales_stage deal_status
company company_record account_record org_record
domain company_website web_domain
firstname first_name forename given_name christian_name
lastname last_name surname family_name
crm microsoft_dynamics dynamics_crm freshsales
contact poc main_contact
ticket enquiry inquiry
support customer_support customer_service customer_care
assign allocate farm_out
pending awaiting_reply parked awaiting_response
helpdesk intercom helpscout servicenow freshservice
employees workforce personnel
department business_unit
job_title jobtitle job_role position_title
org_chart team_structure company_structure
reporting_lines subordinates underlings
time_off leave_request holiday_request pto_request absence_request
vacation vacay hols
time_off absent away_today off_today
time_off bereavement_leave compassionate_leave unpaid_leave sabbatical personal_day
sick duvet_day
hr personio gusto rippling hibob deel
contact contact_info contact_details
manager team_lead teamlead team_leader
contacts google_contacts contacts_app
phone landline home_phone work_phone telephone tel
create_contact save_contact save_number add_contact
contact vcard vcf contact_card
contact friend acquaintance buddy pal
address_book phone_directory telephone_directory yellow_pages white_pages
meeting meetings
event events
calendar calendars
contact contacts
channel channels
message messages
ticket tickets
employee employees
note notes
document documents
company companies
spreadsheet spreadsheets
label labels
transcript transcripts
zoom zoomcall zoom_session
discord discord_chat discord_msg
meeting standing_meeting weekly_meeting recurring_meeting
meeting sales_call discovery_call client_meeting
share collaborate collaborator co_edit
html markup html_page
ticket support_case cases
employee colleagues coworkers co_workers
thread discussion subthread
folder folder_id drive_folder
record records
customer customers
project projects
`

// relatedWeight scales the score a related word adds, relative to the
// query's own word.
const relatedWeight = 0.5

// related maps a term to the terms of its groups, itself excluded.
var related = sync.OnceValue(func() map[string][]string {
	m := map[string][]string{}
	for _, line := range strings.Split(relatedGroups, "\n") {
		var group []string
		for _, w := range strings.Fields(line) {
			a, b, ok := strings.Cut(w, "_")
			if ok {
				group = append(group, porter(a)+"_"+porter(b))
			} else {
				group = append(group, porter(w))
			}
		}
		for _, t := range group {
			for _, r := range group {
				if r != t && !contains(m[t], r) {
					m[t] = append(m[t], r)
				}
			}
		}
	}
	return m
})

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
